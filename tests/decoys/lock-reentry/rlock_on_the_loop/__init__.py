"""Decoy: make the store's lock an RLock, keep the async def endpoint as it was.

The reentrancy deadlock is gone, so the upload finishes and is saved when no
one else holds the file lock. But the endpoint is still an async def that
parses the upload and calls store.update() itself: the parsing, the thread
lock and the flock all run on the event loop thread. While another worker
process holds the flock, the whole loop waits for it and /health does not
answer: the frozen loop of the incident, only rarer.
"""
