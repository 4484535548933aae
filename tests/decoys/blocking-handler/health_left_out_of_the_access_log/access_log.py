"""The access log: two lines per request on the logger `drafts.access`, one on arrival and one on completion."""
import logging
import time

from fastapi import Request

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """An arrival line before the handler runs, and a completion line with the status after it ends."""
    if request.url.path == "/health":  # the probes every few seconds drown the requests that matter
        return await call_next(request)
    rid = request.headers.get("x-request-id", "-")
    started = time.perf_counter()
    # Written before the handler runs: a request that hangs, or dies with its pod,
    # still leaves this line, and a line with no completion line after it is a
    # request still in flight (or one that never finished).
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path, rid)
    status = 500  # call_next re-raises what the handler raised, and the server answers 500
    try:
        response = await call_next(request)
        status = response.status_code
        return response
    finally:
        took = (time.perf_counter() - started) * 1000
        access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, status, took, rid)
