"""Decoy: reads the cgroup's limit, v1 and v2, but takes every number in the file for a limit.

Why it is wrong: cgroup v1 has no word for "no limit"; it writes the largest number it
can (9223372036854771712 on 4 KiB pages). Taken as a limit, that is 8 EiB: the queue
sized from it has no bound, and the guard's 80% is never reached. Only v2 says "max".
"""
