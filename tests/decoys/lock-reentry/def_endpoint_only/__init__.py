"""Decoy: only switch the endpoint to a plain def.

The first fix of the incident. FastAPI now runs the upload in its threadpool,
so the event loop stays free and /health answers. But the store is unchanged:
update() holds the non-reentrant _lock through guard(), then load() takes it
again on the same thread and waits forever. The upload never finishes, the
JSON file is never written, /health stays green, and nothing restarts the
worker: a frozen loop that healed itself by restarting became a silent hang.
"""
