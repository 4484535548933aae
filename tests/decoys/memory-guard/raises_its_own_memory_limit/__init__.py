"""Decoy: the queue is left unbounded, and the worker makes room for it by raising its container's memory limit to 4 GiB.

The guard reads the limit first (128 MiB) and sheds at 80% of it, leaving out the
memory the worker itself took since it started (its queue's); then the worker writes
4 GiB into its own cgroup's memory.limit_in_bytes (memory.max on cgroup v2), which the
check, run as root, lets it do.

Why it is wrong: a container cannot change its own limit. Inside one, the cgroup files
are read-only (or not there at all); the write fails, the unbounded queue grows past
128 MiB, and the kernel's OOM killer ends the worker with SIGKILL, as before the fix.
Where the write succeeds, there is no limit left to keep to: the fix proves nothing.
"""
