"""Decoy: a guard that counts only the processes whose name contains "worker".

What makes a process a Celery worker is its command, `celery ... worker`, not
the name of its Procfile process type or compose service: a correct Procfile
whose workers are `jobs:` and `sync:` is reported as consuming nothing, a
false alarm on every queue.
"""
