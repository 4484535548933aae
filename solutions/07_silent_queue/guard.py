"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads every Celery worker
a deploy file starts and the app's routes, and names the queues left without one.
"""
# Reading deploy files is the job of `loopkata scan` (rule LK07): Procfiles, compose
# files, Kubernetes manifests and systemd units, with every spelling of -Q.
from loopkata.scan.celery_routes import consumed_by_file


def routed_queues(app) -> set:
    """Every queue the app sends tasks to: its routes' queues and its default queue."""
    routes = app.conf.task_routes or {}
    tables = routes if isinstance(routes, (list, tuple)) else [routes]
    queues = {app.conf.task_default_queue}  # where every task no route matches goes
    for table in tables:
        for route in (table.values() if isinstance(table, dict) else []):
            queue = route.get("queue") if isinstance(route, dict) else route
            if isinstance(queue, str):
                queues.add(queue)
    return queues


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    consumed, _ = consumed_by_file(deploy_file, app.conf.task_default_queue)  # every worker, not only the first
    return routed_queues(app) - consumed
