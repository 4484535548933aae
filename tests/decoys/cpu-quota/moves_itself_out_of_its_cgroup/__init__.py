"""Decoy: sized from the quota, then the service moves itself out of its cgroup, into the one above it, where no quota stops it.

Otherwise the reference fix. install() writes the process's pid into the cgroup.procs
of the cgroup above its own, which the check, run as root, lets it do.

Why it is wrong: a container cannot leave its cgroup. Inside one, the cgroup files are
read-only (or not there at all): the write fails, and the quota stops the loop as before.
Where the write succeeds, the service runs under no quota at all: a run outside the
container proves nothing about the fix.
"""
