"""Decoy: a guard that counts every worker of a compose file, but only the first worker line of a Procfile.

"A Procfile has one worker line" holds until someone splits the queues
between two worker processes, one for schema work and one for the rest, as a
compose file does with two services. Then the guard sees only the first line
and names the second worker's queues as missing: a false alarm on a correct
deploy, which teaches the team to ignore the guard.
"""
