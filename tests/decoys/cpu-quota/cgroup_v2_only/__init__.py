"""Decoy: reads cpu.max, the cgroup v2 file, and nothing else.

Every machine built in the last few years has cgroup v2, the reasoning goes;
but many nodes still run cgroup v1 (or a hybrid, whose cpu controller is on
v1), where the quota is cpu.cfs_quota_us / cpu.cfs_period_us in the cpu
controller's own hierarchy. There it finds no quota, and counts every CPU of
the node.
"""
