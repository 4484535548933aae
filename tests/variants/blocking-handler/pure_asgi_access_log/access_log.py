"""The access log: two lines per request on the logger `drafts.access`, as a pure ASGI middleware."""
import logging
import time

access_log = logging.getLogger("drafts.access")


class AccessLog:
    """An arrival line when the request comes in; a completion line when its response has gone, or its handler raised."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        rid = headers.get(b"x-request-id", b"-").decode("latin-1")
        method, path = scope["method"], scope["path"]
        started = time.perf_counter()
        access_log.info("-> %s %s id=%s in flight", method, path, rid)
        status = 500  # what the server answers when the app raises before it started a response

        async def sending(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            took = (time.perf_counter() - started) * 1000
            access_log.info("<- %s %s %s %.0f ms id=%s", method, path, status, took, rid)
