"""Decoy: a guard that reads the queue list from the worker's command line only.

Celery's command line takes an option it is not given from the environment,
CELERY_WORKER_QUEUES for -Q: a compose worker with no -Q and
`CELERY_WORKER_QUEUES: schema,insight,celery` in its `environment` consumes
all three. This guard counts only the default queue for it, and names two
queues that a worker consumes.
"""
