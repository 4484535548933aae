"""The access log, as a Starlette middleware class."""
import logging
import time

from starlette.middleware.base import BaseHTTPMiddleware

logger = logging.getLogger("access")


class AccessLog(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        started = time.monotonic()
        response = await call_next(request)
        logger.info("%s %s %d %.3f", request.method, request.url.path,  # expect: LK08
                    response.status_code, time.monotonic() - started)
        return response
