"""Variant: an asynchronous model client (httpx.AsyncClient), awaited by an async def endpoint.

No thread at all: complete() awaits the model's answer, so the event loop
serves /health and the other calls while it waits. /drafts only awaits, so it
is on app.REVIEWED_ASYNC. The access log is the reference's.
"""
