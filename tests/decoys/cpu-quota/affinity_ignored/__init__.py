"""Decoy: the quota against os.cpu_count(), without the affinity.

A process pinned to fewer CPUs than its quota allows (taskset, a cpuset, the
kubelet's static CPU manager) can run on those CPUs only, and os.cpu_count()
counts the whole machine: the service sizes for CPUs it may not use.
"""
