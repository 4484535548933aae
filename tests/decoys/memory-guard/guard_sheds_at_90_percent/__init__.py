"""Decoy: the guard sheds at 90% of the limit, not at shed_at(limit) (80%), to use more of the memory.

Why it is wrong: between 90% and the limit are a dozen megabytes, which another process in
the container takes in a fraction of a second, and the worker still has to stop its tasks,
run its finally and exit while the memory grows. It sheds, if at all, a few megabytes from
the OOM killer; the container's peak usage shows it shed well above the shedding point.
"""
