"""Variant: the affinity from os.process_cpu_count() on Python 3.13 (os.sched_getaffinity before), the quota rounded up in integers.
"""
