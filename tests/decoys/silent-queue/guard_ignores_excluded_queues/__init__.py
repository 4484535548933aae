"""Decoy: a guard that ignores -X / --exclude-queues.

A worker started with `-Q schema,insight,celery -X schema` consumes 'insight'
and 'celery' only: -X takes a queue out of the list (a common way to keep one
image's command and carve a queue off for another deployment). The guard
counts 'schema' as consumed, and the schema syncs stay PENDING.
"""
