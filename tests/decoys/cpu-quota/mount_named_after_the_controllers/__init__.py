"""Decoy: the v1 cgroup's folder is named after its line's controllers: sys/fs/cgroup/cpu,cpuacct/PATH.

/proc/self/cgroup names the controllers of a hierarchy, not where it is
mounted. systemd mounts cpu and cpuacct together as sys/fs/cgroup/cpu,cpuacct
(with a link named cpu), but libcgroup's cgconfig mounts the same pair at
sys/fs/cgroup/cpu and nowhere else: there the folder does not exist, and the
quota is never read. sys/fs/cgroup/cpu is there on both.
"""
