"""Decoy: the middleware catches Exception and answers its own 500: the completion line is right, but the handler's error and its traceback never reach the server's log.

The client gets 500 and the completion line says 500, so the log looks
complete. But the exception stops in the middleware: uvicorn never sees it,
so the "Exception in ASGI application" record with the traceback, the one
place that says what went wrong and where, is gone (notebook 10 is about
exactly such a swallowed traceback). And `except Exception` does not catch
asyncio.CancelledError, which is not an Exception: a request cancelled in its
handler skips the completion line, because the line is written after the
try, not in a finally.
"""
