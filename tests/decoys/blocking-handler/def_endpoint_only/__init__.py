"""Decoy: make the endpoint a plain def and leave the access log as it is: /health is fixed, but a hung request still leaves no line.

The on-call fix. FastAPI now runs create_draft on a thread of its threadpool,
so the event loop stays free and /health answers while the model writes. The
access log still writes its only line after call_next returns: a request that
hangs in its handler, or dies with its pod, leaves no line at all, and a
handler that raises leaves none either, because call_next re-raises. "Never
arrived" and "never finished" still look the same.
"""
