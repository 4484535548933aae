"""Variant: the workers get their queue lists from the environment, not from -Q.

Celery's command line reads CELERY_WORKER_QUEUES for a missing -Q: the Procfile
sets it before the command (a Procfile line runs in a shell), the compose file
in the worker's `environment`. The reference guard reads both.
"""
