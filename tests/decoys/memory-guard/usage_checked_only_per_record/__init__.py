"""Decoy: no guard task; the producer and the consumer check the usage for each record they take.

Why it is wrong: the usage is looked at only when a record arrives. When the feed goes
quiet while another process in the container keeps taking memory, nothing looks at all:
the container reaches its limit and the kernel's OOM killer kills a process in it, the
worker or the other one, with the worker never shedding load.
"""
