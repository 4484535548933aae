"""Decoy: the cpu controller's line is found with "cpu" in CONTROLLERS, a substring test.

"cpu" is in "cpuset" and in "cpuacct" too. A machine lists its hierarchies by
number, and the cpuset line (or the cpuacct line, where cpu and cpuacct are
mounted apart) often comes before the cpu controller's, naming another
cgroup, such as /: the quota is then read from the wrong folder, which has
none, and the monitor reads a cpu.stat that is never throttled. Split the
controllers on commas.
"""
