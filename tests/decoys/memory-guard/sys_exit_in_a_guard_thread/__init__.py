"""Decoy: the guard is a thread that calls sys.exit(EXIT_SHED) once usage reaches the threshold.

Why it is wrong: sys.exit() raises SystemExit in the thread that calls it, and in a
thread other than the main one that ends the thread alone. The worker goes on reading
and handling records with no guard left, and the container's memory goes on to its
limit and the OOM killer.
"""
