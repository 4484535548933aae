"""Decoy: the access log leaves out GET /health, to keep the liveness probes' noise out of it.

With the endpoint a plain def, the arrival line written before the handler and
a completion line in a finally, every draft request is in the log. But the
probes are the pod's heartbeat in its log: one every few seconds, each with
its arrival and completion, and the last one that completed dates the moment
the event loop stopped answering, the minute before the restart. Without them
the log of a frozen pod and of a quiet one look the same. Filter the noise
where the log is read, not where it is written.
"""
