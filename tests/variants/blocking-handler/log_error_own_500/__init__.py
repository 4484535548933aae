"""Variant: the reference endpoint (a plain def); the middleware logs the handler's error with its traceback itself, then answers its own 500.

The exception does not reach uvicorn, but it is not swallowed either: the
middleware writes it, traceback and all, on the logger `drafts.errors`, and
the completion line is written in a finally, so a request cancelled in its
handler (asyncio.CancelledError is not an Exception) still gets one.
"""
