"""Variant: an RLock in the store, and the endpoint stays async but offloads.

The store's lock is reentrant, so update() can call load() and save() under
guard(). upload_rules stays an async def, awaits the upload, then runs all
the blocking work (parsing and the locked read-modify-write) in one
asyncio.to_thread() call, so nothing blocking runs on the event loop.
"""
