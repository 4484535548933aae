"""Decoy: five executor threads per CPU, ThreadPoolExecutor's size in Python 3.5 to 3.7.

At 1 CPU it is the same 5 threads as min(32, CPUs + 4), Python's own size
since 3.8; at 2 CPUs it is 10, at 8 it is 40, with no ceiling: every worker
process starts that many threads for blocking calls, all of them sharing the
same quota. The executor's size is min(32, CPUs + 4).
"""
