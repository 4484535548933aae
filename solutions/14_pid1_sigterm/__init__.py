"""Kata 14, pid1-sigterm: an export service that takes a whole grace period to stop in its container.

The platform starts the container with the command its Dockerfile gives (ENTRYPOINT and CMD),
and stops it as `docker stop` and the kubelet do for an image that sets no STOPSIGNAL: SIGTERM
to PID 1, then SIGKILL when the grace period is over (leave STOPSIGNAL unset: the service must
stop on SIGTERM). Make a stop quick and clean: the export in flight is answered, pending
rows are flushed, the spooler child uploads its batch and ends (shutdown.log says how it ended),
and the container exits 0 by itself.
"""
