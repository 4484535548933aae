"""The access log: the arrival line (a dependency of the routes) and the completion line (the middleware)."""
import logging
import time

from fastapi import Request

access_log = logging.getLogger("drafts.access")


def arrived(request: Request) -> None:
    """The arrival line, in flight: a dependency, so FastAPI runs it before the endpoint."""
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path,
                    request.headers.get("x-request-id", "-"))


async def log_requests(request: Request, call_next):
    """The completion line with the status, written in a finally, so also when the handler raised."""
    started = time.perf_counter()
    status = 500
    try:
        response = await call_next(request)
        status = response.status_code
        return response
    finally:
        took = (time.perf_counter() - started) * 1000
        access_log.info("<- %s %s %s %.0f ms id=%s", request.method, request.url.path, status, took,
                        request.headers.get("x-request-id", "-"))
