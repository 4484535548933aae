"""Decoy: a guard that takes a route's queue only from a {"queue": ...} dict.

Celery also accepts the queue's name alone, `{"export.*": "export"}` (the
short form of its documentation): the sender routes those tasks to 'export'
all the same, but this guard skips the route, never checks the queue, and
approves a deploy that leaves it without a consumer.
"""
