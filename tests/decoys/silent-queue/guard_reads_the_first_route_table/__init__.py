"""Decoy: a guard that, when task_routes is a list of routers, reads only the first one.

Celery asks every router of the list in turn, and a task goes where the
first that answers sends it: each table's queues receive tasks. This guard
checks the first table's queues and approves a deploy that leaves a later
table's queue without a consumer.
"""
