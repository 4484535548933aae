"""Decoy: no bound and no guard; the producer catches MemoryError and sheds then.

Why it is wrong: under a cgroup's memory limit no allocation fails. The kernel lets the
cgroup take pages until it reaches its limit, then its OOM killer ends the process with
SIGKILL: no MemoryError is ever raised, no except block runs, nor any finally. MemoryError
comes from an address-space limit (ulimit -v), which is not what a container sets.
"""
