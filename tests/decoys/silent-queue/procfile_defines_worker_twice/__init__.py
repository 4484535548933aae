"""Decoy: in the Procfile, two `worker:` lines, one on -Q schema and one on -Q insight,celery.

Together the two commands consume every queue, and a guard that counts lines
approves the file. But a Procfile maps each process type to one command:
honcho refuses the file, and a platform keeps one of the two lines, so one
of the two workers is never started and its queues' tasks stay PENDING.
"""
