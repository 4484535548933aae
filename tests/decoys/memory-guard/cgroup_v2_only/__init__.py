"""Decoy: reads the limit the cgroup v2 way only: the '0::PATH' line of /proc/self/cgroup, then memory.max.

Why it is wrong: it was written on a cgroup v2 laptop. On a cgroup v1 host (older
kernels and distributions, many CI runners and build hosts) /proc/self/cgroup
still has a '0::/' line, for an empty unified hierarchy, but no memory.max is there:
the limit is memory.limit_in_bytes in the memory hierarchy, and this finds no limit at all.
"""
