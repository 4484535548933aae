"""Decoy: the monitor blames throttling when nr_periods grew and the lag was over budget.

nr_periods counts every CFS period in which the cgroup ran, throttled or not:
it grows in any cgroup with a quota, whether or not the quota ran out. With
a blocking call on the loop, in a pod whose quota is never reached, the
report blames the CPU limit. nr_throttled counts the periods the quota
stopped the process.
"""
