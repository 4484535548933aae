"""Decoy: effective_cpus() and the workers are right, but the executor is Python's default.

ThreadPoolExecutor() with no max_workers sizes itself from the host's CPUs
(os.cpu_count(), or os.process_cpu_count() on 3.13): min(32, 24 + 4) = 28
threads in a pod with 2 CPUs, in every worker. The number the service worked
out is logged, and not used.
"""
