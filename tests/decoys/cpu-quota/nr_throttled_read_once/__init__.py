"""Decoy: the monitor reads nr_throttled above 0 as "throttled".

cpu.stat's counters add up from the cgroup's start: a pod throttled once, at
start-up or an hour ago, keeps nr_throttled above 0 for as long as it lives,
and every later report blames throttling, whatever held the loop this time.
Only what nr_throttled grew by while watch() ran is about this watch.
"""
