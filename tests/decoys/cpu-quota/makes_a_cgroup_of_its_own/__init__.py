"""Decoy: the service makes a cgroup of its own inside its container's and moves into it, to count its CPU apart.

Otherwise the reference fix: the cgroup is found once, at start-up, and the monitor
reads that one's cpu.stat, the container's, whose quota still stops the process (a
cgroup's quota covers the cgroups inside it). The check, run as root, lets it make the
cgroup.

Why it is wrong: a container cannot make cgroups: inside one, the cgroup file system
is read-only (or not there at all), and the mkdir fails. Where it succeeds, the cgroup
it made stays behind when the service ends, and with it the container's own, which
cannot be removed while a cgroup is inside it.
"""
