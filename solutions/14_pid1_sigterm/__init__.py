"""Kata 14, pid1-sigterm: an export service that takes a whole grace period to stop in its container.

The platform starts the container by running `sh entrypoint.sh` as its PID 1 (the Dockerfile's
ENTRYPOINT), and stops it as `docker stop` and the kubelet do: SIGTERM to PID 1, then SIGKILL
when the grace period is over. Fix `entrypoint.sh` and `service.py` so that a stop is quick and
clean: the export in flight is answered, pending rows are flushed, the spooler child ends after
flushing, and the container exits 0 by itself.
"""
