"""Decoy: on the way out, cancel the step in progress and call `events.aclose()` right away, without waiting for the step to unwind: aclose() fails with "asynchronous generator is already running", and the server logs it for every client that leaves mid-step.

`step.cancel()` only asks: the CancelledError reaches the generator the next
time the step's task runs, and until then the generator is still in the
middle of its step. aclose() on a generator that is running raises
RuntimeError. The step does stop, and the generator is closed by its own
cancellation, so nothing is left running; but the wrapper raises from its
finally, and every client that goes away while a step runs leaves an
"Exception in ASGI application" with that traceback in the server's log.
Wait for the cancelled step (`await asyncio.wait({step})`) before aclose().
"""
