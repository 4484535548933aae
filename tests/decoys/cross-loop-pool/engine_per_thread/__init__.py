"""Decoy: one pooled engine per worker thread, never disposed.

Each thread gets its own engine, so no connection is shared with the API's
loop. But asyncio.to_thread reuses its worker threads, each job runs on a new
loop, and the thread's pool hands the next job the connection the last job's
(now closed) loop opened. Even where that did not fail, every thread's pool
keeps its connections open for good.
"""
