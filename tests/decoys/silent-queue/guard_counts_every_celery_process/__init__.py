"""Decoy: a guard that counts every `celery` process but beat as a consumer.

It leaves out the scheduler, and so passes the beat case, but `celery
flower` (the monitoring web UI) is counted as a worker on the default queue:
a Procfile whose worker consumes 'schema,insight' next to a flower process
is approved, and the digests sent to 'celery' stay PENDING. Only the
`worker` subcommand consumes queues.
"""
