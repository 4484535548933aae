"""Admission control: refuse new jobs when memory runs short."""
import psutil
from aiohttp import web
from memory import memory_limit, memory_used

SHED_PERCENT = 85


@web.middleware
async def admission(request, handler):
    limit, used = memory_limit(), memory_used()
    if request.method == "POST" and limit and used and used * 100 > limit * SHED_PERCENT:
        raise web.HTTPServiceUnavailable(text="busy, try again")
    return await handler(request)


async def health(request):
    return web.json_response({"host_memory_percent": psutil.virtual_memory().percent})
