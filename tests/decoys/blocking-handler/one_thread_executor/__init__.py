"""Decoy: run the model call with run_in_executor on a pool of one thread: /health answers, but calls made at the same time wait for each other.

The event loop is free, so /health answers at once. But the pool has a single
worker thread, so the model works on one call at a time: with four users
asking at once, the fourth waits for the three before it, and a slow model
makes every user wait for everyone ahead of them. A pool meant for blocking
calls needs as many threads as calls you expect at once (FastAPI's own
threadpool has 40; asyncio's default executor has min(32, CPUs + 4)).
"""
