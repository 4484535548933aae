"""Decoy: notice the freeze from a thread, then send the worker SIGTERM so that uvicorn shuts it down gracefully.

uvicorn's SIGTERM handler only sets a flag that the server's main loop reads,
and a graceful shutdown drains connections on the event loop: both need the
loop that is frozen. The signal interrupts the blocking call, the handler sets
its flag, the call resumes, and the worker stays as it was. A frozen worker can
only be ended from outside the loop: os._exit().
"""
