"""Decoy: notice the freeze from a thread, then send uvicorn's supervisor SIGHUP, which restarts the workers.

SIGHUP restarts every worker, one after another: the healthy one is replaced
too, and each old worker is stopped with SIGTERM and waited for. The frozen
worker never acts on SIGTERM (its handler needs the frozen loop), so the
supervisor waits for it for good, and the frozen worker stays. Only the frozen
worker should go, and it has to end itself.
"""
