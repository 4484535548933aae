"""The admin endpoint that starts a refresh."""
from aiohttp import web

from . import jobs, runner


async def refresh(request: web.Request) -> web.Response:
    runner.submit(jobs.refresh_views, {"dsn": request.app["dsn"]})
    return web.json_response({"started": True}, status=202)
