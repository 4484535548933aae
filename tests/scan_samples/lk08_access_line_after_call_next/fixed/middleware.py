"""The access log, as a Starlette middleware class: a line on arrival, and one on completion."""
import logging
import time

from starlette.middleware.base import BaseHTTPMiddleware

logger = logging.getLogger("access")


class AccessLog(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        started = time.monotonic()
        logger.info("-> %s %s", request.method, request.url.path)
        status = 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            logger.info("<- %s %s %d %.3f", request.method, request.url.path, status, time.monotonic() - started)
