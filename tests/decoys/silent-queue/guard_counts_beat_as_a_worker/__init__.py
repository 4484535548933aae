"""Decoy: a guard that counts every `celery ...` command of a deploy file as a worker.

`celery beat` runs with the same `-A reports.celery_app` and no -Q, so this
guard takes it for a worker on the default queue. Beat is the scheduler: it
sends tasks when they are due and consumes no queue, so a deploy whose only
other "consumer" of 'celery' is beat leaves every digest PENDING, and the
guard approves it.
"""
