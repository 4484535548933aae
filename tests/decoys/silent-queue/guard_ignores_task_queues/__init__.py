"""Decoy: a guard that takes a worker with no -Q to consume the default queue only, even when the app sets task_queues.

With `task_queues` declared, Celery starts a worker that has no queue option
on every queue listed there. The guard names them all as unconsumed on a
correct deploy, and a guard that cries wolf gets switched off.
"""
