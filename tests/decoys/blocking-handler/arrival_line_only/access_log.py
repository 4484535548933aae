"""The access log: one line per request on the logger `drafts.access`, written as it arrives."""
import logging

from fastapi import Request

access_log = logging.getLogger("drafts.access")


async def log_requests(request: Request, call_next):
    """Write the line before the handler runs, so that a request that hangs still has one."""
    access_log.info("-> %s %s id=%s in flight", request.method, request.url.path,
                    request.headers.get("x-request-id", "-"))
    return await call_next(request)
