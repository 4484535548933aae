"""Decoy: notice the freeze from a thread and end the process with os._exit(3).

The frozen worker does exit, but uvicorn's supervisor reads exit status 3 as
STARTUP_FAILURE: a worker that could not start, which would fail the same way
on every restart. It stops the parent process and with it the healthy worker:
the whole pod goes down. Exit with any other status, and the supervisor starts
a replacement.
"""
