"""Decoy: `async with asyncio.timeout(interval)` around `await anext(events)` instead of wait_for: it cancels the step just the same, and the stream still ends at the first keepalive.

asyncio.timeout cancels the task it runs in when the time is up, and turns
the CancelledError into TimeoutError on the way out: the step is cancelled
exactly as with wait_for (which has been built on it since Python 3.12). The
generator ends at the first keepalive, and the stream with it.
"""
