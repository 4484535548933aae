"""Variant: create_draft stays an async def and awaits asyncio.to_thread(model.complete, ...).

The blocking call runs on a thread of the loop's default executor and the
coroutine only awaits it, so the event loop stays free; someone checked that,
and put /drafts on app.REVIEWED_ASYNC. The access log is the reference's.
"""
