"""Decoy: the monitor names throttling only when nr_throttled grew and the lag was over budget.

A throttled period stops every thread of the cgroup, whether or not the loop
had a callback due at that moment: the p99 of one short watch can stay within
budget while the quota keeps stopping the process, and the report says
"none" until the requests pay for it. When nr_throttled grew, the quota
stopped the process: the report names throttling whatever the lag.
"""
