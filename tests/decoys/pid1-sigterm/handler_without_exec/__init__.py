"""Decoy: the service handles SIGTERM, the entrypoint is unchanged.

The shell running entrypoint.sh is still PID 1, with Python as its child. The shell has no
SIGTERM handler, so the kernel drops the signal and the service's handler never runs.
"""
