"""Decoy: a guard that reads only the first worker a deploy file starts.

With one worker per file it is right. When the queues are split between two
workers (one for schema work, one for the rest), it sees half of them and
reports queues as missing that the second worker consumes.
"""
