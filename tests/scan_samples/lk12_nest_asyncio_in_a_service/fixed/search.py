"""Search endpoint that reuses the synchronous search client, which runs its own event loop inside."""
import asyncio

from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from search_sdk import SearchClient

client = SearchClient()


async def search(request):
    return JSONResponse(await asyncio.to_thread(client.search, request.query_params["q"]))


app = Starlette(routes=[Route("/search", search)])
