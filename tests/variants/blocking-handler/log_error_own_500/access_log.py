"""The access log: two lines per request on the logger `drafts.access`; a handler's error on `drafts.errors`."""
import logging
import time

from fastapi import Request
from fastapi.responses import JSONResponse

access_log = logging.getLogger("drafts.access")
errors = logging.getLogger("drafts.errors")


async def log_requests(request: Request, call_next):
    """An arrival line, a completion line in a finally; an error is logged with its traceback, then answered 500."""
    rid = request.headers.get("x-request-id", "-")
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path, rid)
    started = time.perf_counter()
    status = 500
    try:
        response = await call_next(request)
    except Exception:  # noqa: BLE001 - logged with its traceback, then answered 500
        errors.exception("%s %s id=%s: the handler raised", request.method, request.url.path, rid)
        response = JSONResponse({"detail": "internal error"}, status_code=500)
    else:
        status = response.status_code
    finally:
        took = (time.perf_counter() - started) * 1000
        access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, status, took, rid)
    return response
