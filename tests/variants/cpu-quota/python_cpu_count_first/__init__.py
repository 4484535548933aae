"""Variant: PYTHON_CPU_COUNT, when set, is the answer; otherwise the smaller of the affinity and the quota.
"""
