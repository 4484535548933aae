"""Decoy: effective_cpus() is os.process_cpu_count(), Python 3.13's count of the CPUs the process may use.

It follows the affinity (a cpuset) and PYTHON_CPU_COUNT, but not the cgroup's
CPU quota, which is what a pod's CPU limit and `docker run --cpus` set: in a
pod limited to 2 CPUs on a 24-core node it still says 24. And Python 3.11 and
3.12 have no os.process_cpu_count() at all: the service does not start.
"""
