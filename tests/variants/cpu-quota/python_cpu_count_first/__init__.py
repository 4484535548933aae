"""Variant: PYTHON_CPU_COUNT read first, with the affinity; at 1 CPU the cgroup's files are not read at all.
"""
