"""Decoy: a guard that strips the spaces around each name of a worker's queue list.

Celery splits `-Q "schema, insight, celery"` on commas only: that worker
consumes 'schema', ' insight' and ' celery', and nothing is sent to the last
two. This guard reads 'insight' and 'celery' and approves the file; on the
broker of files the worker then exits with "Invalid exchange name", on Redis
it starts, and the questions and digests stay PENDING in silence.
"""
