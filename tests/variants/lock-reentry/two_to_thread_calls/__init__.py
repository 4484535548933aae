"""Variant: an RLock in the store; the async def endpoint offloads in two steps.

upload_rules stays an async def and awaits the upload, then awaits
asyncio.to_thread() twice: once for parse_rules, once for store.update().
summarize() and building the answer stay on the loop: they touch neither a
lock nor a file.
"""
