"""Decoy: the guard looks at the cgroup's usage once a second, to spend less time reading files.

Why it is wrong: memory taken elsewhere in the container goes from 80% to the limit in
far less than a second (here about a quarter of one): the guard looks before, when all
is well, and next after the kernel's OOM killer has struck. The docstring asks for a look
at least every 0.05 s; reading memory.current is a few microseconds.
"""
