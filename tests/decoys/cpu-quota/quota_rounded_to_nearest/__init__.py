"""Decoy: the quota is rounded to the nearest CPU with round().

A quota of 1.2 CPUs is 1.2 CPUs' worth of time in every period: two workers
can use it, and round() sizes for 1, leaving a fifth of the quota idle. And
round() rounds halves to even: round(2.5) is 2 but round(3.5) is 4, and
round(0.5) is 0 (held at 1 only by the floor). Any part of a CPU is a CPU to
plan for: a quota is rounded up.
"""
