"""Decoy: sized from the quota, then the service lifts its own cgroup's CPU quota, so that no period stops it.

Otherwise the reference fix. install() writes "no quota" into its own cgroup
(-1 into cpu.cfs_quota_us on cgroup v1, "max" into cpu.max on v2), which the
check, run as root, lets it do.

Why it is wrong: a container cannot change its own quota. Inside one, the cgroup files
are read-only (or not there at all): the write fails, and the loop is stopped in every
period where the quota runs out, as before. Where the write succeeds, there is no quota
left to keep to: a run without one proves nothing about the fix.
"""
