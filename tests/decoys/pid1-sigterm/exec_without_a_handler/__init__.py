"""Decoy: `exec python service.py` and nothing else.

Python is PID 1 now, but it has no SIGTERM handler of its own, and the kernel drops a signal that
a PID namespace's init does not handle: every stop still waits out the grace period, then SIGKILL.
"""
