"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads every Celery worker
a deploy file starts and the app's routes, and names the queues left without one.
"""
import shlex
from pathlib import Path

import yaml


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


def commands(deploy_file) -> list:
    """Every process command in a Procfile ("name: command" lines) or a compose file (services' commands)."""
    path = Path(deploy_file)
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yml", ".yaml"):
        services = (yaml.safe_load(text) or {}).get("services") or {}
        found = [s.get("command") for s in services.values() if isinstance(s, dict)]
    else:
        found = [line.split(":", 1)[1] for line in text.splitlines()
                 if ":" in line and not line.lstrip().startswith("#")]
    return [shlex.split(c) if isinstance(c, str) else [str(a) for a in c] for c in found if c]


def consumed_queues(args: list, default_queue: str) -> set | None:
    """The queues a `celery ... worker` command consumes; None if it is not a Celery worker."""
    if "worker" not in args or not any(Path(a).name == "celery" for a in args):
        return None
    for i, arg in enumerate(args):
        if arg in ("-Q", "--queues") and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--queues="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-Q") and len(arg) > 2:
            value = arg[2:]
        else:
            continue
        return {q.strip() for q in value.split(",") if q.strip()}
    return {default_queue}  # no queue option: the default queue only


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    consumed = set()
    for args in commands(deploy_file):
        queues = consumed_queues(args, app.conf.task_default_queue)
        if queues is None:
            continue
        consumed |= queues
        if not str(deploy_file).endswith((".yml", ".yaml")):
            break  # a Procfile has one worker line
    return routed_queues(app) - consumed
