"""Decoy: a guard that counts every worker line of a Procfile, two lines of the same process type included.

`worker: ... -Q schema` and `worker: ... -Q insight,celery` together consume
every queue, and this guard approves the file. But a process type is one
command: honcho refuses such a file, and a platform keeps one of the two
lines, so either the schema syncs or everything else stays PENDING.
"""
