"""Decoy: bridge with asyncio.get_event_loop() instead of asyncio.run().

"asyncio.run makes a new loop every time: reuse one." A worker thread has no
event loop, so get_event_loop() raises there (or, with the fallback, each
thread makes one and keeps it). Either way the job's loop is still not the
API's loop, and the shared pool still hands it the API's connections.
"""
