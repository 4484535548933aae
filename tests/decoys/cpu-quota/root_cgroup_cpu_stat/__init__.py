"""Decoy: the monitor reads /sys/fs/cgroup/cpu/cpu.stat (or /sys/fs/cgroup/cpu.stat), the root cgroup's.

Inside a container with a cgroup namespace of its own, that file is the
container's. Anywhere else it is the root of the hierarchy: it has no quota,
is never throttled, and its counters say nothing about the process's own
cgroup, the one /proc/self/cgroup names, whose quota stops the process.
"""
