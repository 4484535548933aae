"""Decoy: cpu.cfs_quota_us is divided by the period whatever it holds.

On cgroup v1, -1 in cpu.cfs_quota_us means no quota at all; divided by the
period it is a tiny negative number, rounded up to 0 and then held at the
floor of 1: a cgroup with no limit is run on one CPU. ("max" on cgroup v2 fails
to parse, and is read as no quota, so only v1 machines see it.)
"""
