"""The access log: two lines per request on the logger `drafts.access`, one on arrival and one on completion."""
import logging
import time

from fastapi import Request
from fastapi.responses import JSONResponse

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """An arrival line, then a completion line with the status; a handler that raises becomes our own 500."""
    rid = request.headers.get("x-request-id", "-")
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path, rid)
    started = time.perf_counter()
    try:
        response = await call_next(request)
    except Exception:
        response = JSONResponse({"detail": "internal error"}, status_code=500)
    took = (time.perf_counter() - started) * 1000
    access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, response.status_code, took, rid)
    return response
