"""The access log: two lines per request on the logger `drafts.access`, one on arrival and one on completion."""
import logging
import time

from fastapi import Request

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """An arrival line before the handler runs, and a completion line with the status after it."""
    rid = request.headers.get("x-request-id", "-")
    started = time.perf_counter()
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path, rid)
    response = await call_next(request)
    took = (time.perf_counter() - started) * 1000
    access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, response.status_code, took, rid)
    return response
