"""Decoy: the worker makes a cgroup of its own inside its container's and moves into it, to count its memory apart.

Otherwise the reference fix: the guard reads the container's cgroup, found once at
start-up, and the kernel still counts the worker's memory there (a cgroup's limit covers
the cgroups inside it). The check, run as root, lets it make the cgroup.

Why it is wrong: a container cannot make cgroups: inside one, the cgroup file system
is read-only (or not there at all), and the mkdir fails. Where it succeeds, the cgroup
it made stays behind when the worker ends, and with it the container's own, which
cannot be removed while a cgroup is inside it.
"""
