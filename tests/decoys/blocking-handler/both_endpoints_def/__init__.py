"""Decoy: both endpoints plain defs, /drafts and /health, so that nothing is left on the event loop to review.

/drafts is fixed, and the access log is the reference's. But a plain def
endpoint needs a thread of the server's threadpool, and /health now waits for
one like any request: when slow model calls hold every thread (40 by default,
fewer than the calls a busy minute brings), the liveness probe waits behind
them, gets no answer, and the pod is restarted mid-request, the incident again
by another road. A health check must not need what the slow calls use up: an
async def that only awaits answers from the loop.
"""
