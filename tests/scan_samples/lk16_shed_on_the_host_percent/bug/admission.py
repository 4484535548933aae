"""Admission control: refuse new jobs when memory runs short."""
import psutil
from aiohttp import web

SHED_PERCENT = 85


@web.middleware
async def admission(request, handler):
    if request.method == "POST" and psutil.virtual_memory().percent > SHED_PERCENT:  # expect: LK16
        raise web.HTTPServiceUnavailable(text="busy, try again")
    return await handler(request)


async def health(request):
    return web.json_response({"host_memory_percent": psutil.virtual_memory().percent})
