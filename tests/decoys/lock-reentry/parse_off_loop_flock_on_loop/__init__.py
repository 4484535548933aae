"""Decoy: an RLock in the store, and only parse_rules moved off the loop.

The store no longer deadlocks, and the CPU work is offloaded:
`await asyncio.to_thread(parse_rules, raw)`. But store.update() is still
called directly from the async def endpoint, so the thread lock, the flock,
the file read and the file write all run on the event loop thread. While
another worker process holds the flock, fcntl.flock() blocks the whole loop
and /health cannot answer until that process lets go.
"""
