"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads every worker command
in a deploy file (a Procfile or a docker-compose file) and the app's default
queue and routes, and names the queues left without a consumer.
"""
import shlex
from pathlib import Path

import yaml


def _queue_name(queue) -> str:
    return queue if isinstance(queue, str) else getattr(queue, "name", str(queue))


def routed_queues(app) -> set:
    """Every queue the app really sends a task to: ask the app's own router where each registered task goes.

    This is what send_task/.delay do, so no route syntax (globs, regexes, router functions) can fool it.
    """
    app.loader.import_default_modules()
    queues = set()
    for name in app.tasks:
        if name.startswith("celery."):
            continue  # Celery's built-in tasks
        queues.add(app.amqp.router.route({}, name)["queue"].name)
    return queues


def _commands(deploy_file) -> list[list[str]]:
    """The argument lists of every process the file starts."""
    path = Path(deploy_file)
    text = path.read_text()
    if path.suffix in (".yml", ".yaml") or path.name.startswith(("docker-compose", "compose")):
        services = (yaml.safe_load(text) or {}).get("services") or {}
        commands = []
        for service in services.values():
            command = (service or {}).get("command")
            if isinstance(command, str):
                commands.append(shlex.split(command))
            elif isinstance(command, list):
                commands.append([str(arg) for arg in command])
        return commands
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or ":" not in line:
            continue
        commands.append(shlex.split(line.split(":", 1)[1]))
    return commands


def _is_celery_worker(argv: list[str]) -> bool:
    return "worker" in argv and any(arg == "celery" or arg.endswith("/celery") for arg in argv)


def _consumed(argv: list[str], default_queue: str) -> set:
    """The queues one worker command consumes: its -Q/--queues, else the app's default queue."""
    given = None
    excluded = set()
    args = iter(argv)
    for arg in args:
        value = None
        if arg in ("-Q", "--queues"):
            value = next(args, "")
        elif arg.startswith("--queues="):
            value = arg.split("=", 1)[1]
        elif arg.startswith("-Q"):
            value = arg[2:].lstrip("=")
        elif arg in ("-X", "--exclude-queues"):
            excluded |= {q.strip() for q in next(args, "").split(",") if q.strip()}
            continue
        elif arg.startswith("--exclude-queues="):
            excluded |= {q.strip() for q in arg.split("=", 1)[1].split(",") if q.strip()}
            continue
        if value is not None:
            given = (given or set()) | {q.strip() for q in value.split(",") if q.strip()}
    consumed = given if given is not None else {default_queue}
    return consumed - excluded


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    routed = routed_queues(app)
    consumed = set()
    for argv in _commands(deploy_file):
        if _is_celery_worker(argv):
            consumed |= _consumed(argv, app.conf.task_default_queue)
    return routed - consumed
