"""Decoy: the monitor blames throttling whenever the lag is over budget.

Once the team learned about CFS quotas, every late loop looked like one. But
a blocking call on the loop, or another thread holding the GIL, makes the
same lag with no throttling at all, and the report now sends the on-call to
raise the CPU limit for a bug in the code. Only nr_throttled says that the
quota stopped the process.
"""
