"""Decoy: notice the freeze from a thread of the worker, as it should, and then call sys.exit().

sys.exit() raises SystemExit in the thread that calls it, and a SystemExit that
ends a thread ends that thread only: the watchdog stops, the frozen loop goes on
holding the worker, and the supervisor's ping is still answered. To end a
process from a thread, end the process: os._exit().
"""
