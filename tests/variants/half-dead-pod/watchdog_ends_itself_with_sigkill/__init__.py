"""Variant: the reference watchdog, ending its worker with SIGKILL sent to itself instead of os._exit(70).

A worker killed by a signal is no start-up failure to uvicorn's supervisor
(its exit code is -9, not 3): the supervisor sees a dead worker and starts a
fresh one, as it does for any exit status but 3.
"""
