"""The CPUs this container may use: its affinity, and its cgroup's CPU quota."""
import math
import os
from pathlib import Path


def cpu_limit() -> int:
    """The smallest of the affinity and the quota (cpu.max on cgroup v2, cfs_quota_us on v1), at least 1."""
    cpus = len(os.sched_getaffinity(0))
    for quota_file, period_file in (("/sys/fs/cgroup/cpu.max", None),
                                    ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us")):
        try:
            if period_file is None:
                quota, period = Path(quota_file).read_text().split()[:2]
            else:
                quota, period = Path(quota_file).read_text().strip(), Path(period_file).read_text().strip()
        except (OSError, ValueError):
            continue
        if quota not in ("max", "-1"):
            cpus = min(cpus, math.ceil(int(quota) / int(period)))
        break
    return max(1, cpus)
