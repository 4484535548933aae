"""Decoy: PYTHON_CPU_COUNT, when set, is the answer, as Python 3.13's os.cpu_count() takes it.

An image built with PYTHON_CPU_COUNT=8 for the 8-CPU pods keeps saying 8 in
a pod whose limit is 1 CPU, or on a process pinned to one: the kernel stops
the process at its quota whatever the variable says. The variable is one
more limit, and the smallest limit wins.
"""
