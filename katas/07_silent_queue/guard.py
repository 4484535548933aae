"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads a deploy file's
worker command and the app's routes, and names the queues left without one.
"""
from pathlib import Path


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    routed = {route["queue"] for route in app.conf.task_routes.values()} | {"celery"}
    for line in Path(deploy_file).read_text().splitlines():
        if "worker" in line:
            command = line.split(":", 1)[1]
            if "-Q " in command:
                consumed = set(command.split("-Q ", 1)[1].split()[0].split(","))
            else:
                consumed = {"celery"}
            return routed - consumed
    return routed
