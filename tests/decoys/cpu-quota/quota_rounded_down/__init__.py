"""Decoy: the quota is cut to whole CPUs with int().

A quota of half a CPU becomes 0 CPUs: the launcher starts no worker, and each
executor is sized for nothing. One and a half CPUs become 1, and half a CPU of
the quota is never used. A quota is rounded up, and never below 1.
"""
