"""Decoy: the queue is left unbounded, and the worker moves itself out of its container's cgroup, into the one above it.

The guard remembers the cgroup the worker started in and reads that cgroup's usage,
which no longer counts the worker's own memory: it sheds only when the other
processes in the container fill it. The move is a write of the worker's pid into the
cgroup.procs of the cgroup above, which the check, run as root, lets it do.

Why it is wrong: a container cannot leave its cgroup. Inside one, the cgroup files are
read-only (or not there at all); the write fails, the unbounded queue grows past the
limit, and the kernel's OOM killer ends the worker with SIGKILL. Where the write
succeeds, the worker runs under no limit at all: the fix proves nothing.
"""
