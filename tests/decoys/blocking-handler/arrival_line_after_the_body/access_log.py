"""The access log: two lines per request on the logger `drafts.access`, one on arrival and one on completion."""
import logging
import time

from fastapi import Request

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """An arrival line naming the body's size, and a completion line with the status after the handler ends."""
    rid = request.headers.get("x-request-id", "-")
    started = time.perf_counter()
    body = await request.body()  # cached by Starlette: the handler reads it again for free
    access_log.info("-> %s %s %d bytes id=%s in flight", request.method, request.url.path, len(body), rid)
    status = 500
    try:
        response = await call_next(request)
        status = response.status_code
        return response
    finally:
        took = (time.perf_counter() - started) * 1000
        access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, status, took, rid)
