"""The access log: one line per request on the logger `drafts.access`."""
import logging
import time

from fastapi import Request

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """Write one line per request: method, path, status, time taken, and the X-Request-ID."""
    started = time.perf_counter()
    response = await call_next(request)
    took = (time.perf_counter() - started) * 1000
    access_log.info(
        "%s %s %s %.0f ms id=%s",
        request.method, request.url.path, response.status_code, took, request.headers.get("x-request-id", "-"),
    )
    return response
