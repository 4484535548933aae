"""Decoy: the limit from /proc/meminfo (MemTotal), falling back to os.sysconf, as psutil reads it.

Why it is wrong: /proc/meminfo is not namespaced. Inside a container it describes the
host (60.9 GiB in the incident's 256 MiB container), and so do os.sysconf and
psutil.virtual_memory(). The container's limit lives only in its cgroup, so a queue
sized from this has no bound worth the name.
"""
