"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads every Celery worker
a deploy file starts and the app's routes, and names the queues left without one.
"""
import re
import shlex
from pathlib import Path

import click
import yaml
from celery.bin.celery import celery  # Celery's own command line

# A Procfile line as honcho and foreman read it: "name: command". Anything else, a comment
# ("#worker: ...") included, starts nothing.
PROCFILE_LINE = re.compile(r"^([A-Za-z0-9_-]+):\s*(.+)$")


def routed_queues(app) -> set:
    """Every queue the app sends tasks to: its routes' queues and its default queue."""
    routes = app.conf.task_routes or {}
    tables = routes if isinstance(routes, (list, tuple)) else [routes]  # one table, or a list of routers
    queues = {app.conf.task_default_queue}  # where every task no route matches goes
    for table in tables:
        for route in (table.values() if isinstance(table, dict) else []):
            queue = route.get("queue") if isinstance(route, dict) else route  # {"queue": q}, or q alone
            queue = getattr(queue, "name", queue)  # a kombu Queue
            if isinstance(queue, str):
                queues.add(queue)
    return queues


def commands(deploy_file) -> list:
    """Every process command a default deploy of a Procfile or a compose file starts: (arguments, environment)."""
    path = Path(deploy_file)
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yml", ".yaml"):
        services = (yaml.safe_load(text) or {}).get("services") or {}
        # a service behind `profiles` is not started by a plain `docker compose up`
        found = [(s.get("command"), environment(s.get("environment"))) for s in services.values()
                 if isinstance(s, dict) and not s.get("profiles")]
    else:
        found, seen = [], {}
        for number, line in enumerate(text.splitlines(), 1):
            match = PROCFILE_LINE.match(line)
            if not match:
                continue
            name, command = match.groups()
            if name in seen:  # honcho refuses the file; a platform keeps one of the two commands
                raise ValueError(f"{path.name} defines the process type {name!r} twice (lines {seen[name]} and "
                                 f"{number}): a platform runs only one of these commands")
            seen[name] = number
            found.append((shlex.split(command, comments=True), {}))  # run by a shell: `#` starts a comment
    found = [(shlex.split(c) if isinstance(c, str) else [str(a) for a in c], env) for c, env in found if c]
    for args, env in found:  # a shell runs a Procfile line: NAME=value before the command sets a variable
        while args and re.fullmatch(r"[A-Za-z_]\w*=.*", args[0]):
            env.update([args.pop(0).split("=", 1)])
    return found


def environment(value) -> dict:
    """A compose service's `environment`: a mapping, or a list of NAME=value."""
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items() if v is not None}
    return dict(str(item).split("=", 1) for item in value or [] if "=" in str(item))


def consumed_queues(args: list, env: dict, app) -> set | None:
    """The queues a `celery ... worker` command consumes; None if it starts no worker (`celery beat`...)."""
    try:
        options = worker_options(args)
    except click.UsageError:
        return set()  # Celery refuses the command line: no worker starts, and nothing is consumed
    if options is None:
        return None
    # -D/--detach: the worker forks into the background and the command exits at once; the platform
    # or the container, whose process that was, takes it as ended, and nothing stays up to consume.
    if options.get("detach") or click.BOOL.convert(env.get("CELERY_WORKER_DETACH") or "0", None, None):
        return set()
    # Celery reads a missing option from CELERY_<COMMAND>_<OPTION>
    value = options.get("queues") or env.get("CELERY_WORKER_QUEUES") or None
    excluded = options.get("exclude_queues") or env.get("CELERY_WORKER_EXCLUDE_QUEUES") or ""
    excluded = set(excluded.split(",")) if excluded else set()
    if value is not None:
        return set(value.split(",")) - excluded  # commas only, as Celery splits: "a, b" names 'a' and ' b'
    if app.conf.task_queues:  # no queue option: every queue the app declares...
        return {q.name for q in app.conf.task_queues} - excluded
    return {app.conf.task_default_queue} - excluded  # ...or else its default queue only


def worker_options(args: list) -> dict | None:
    """A `celery ... worker` command's options, read by Celery's own parser; None if it starts no worker.

    That parser is click's: the last of an option counts, and it knows no abbreviations (`--queue` is
    not `--queues`), reads `-Q=a` as the queue '=a', and refuses an option the worker does not have
    (`-A` after `worker` too: in Celery 5 it is the `celery` command's): click.UsageError."""
    program = next((i for i, a in enumerate(args) if Path(a).name == "celery"), None)
    if program is None:
        return None
    context = click.Context(celery)
    _, rest, _ = celery.make_parser(context).parse_args(args[program + 1:])  # `celery -A app`, up to its command
    if rest[:1] != ["worker"]:
        return None
    worker = celery.get_command(context, "worker")
    return worker.make_parser(click.Context(worker, parent=context)).parse_args(rest[1:])[0]


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    consumed = set()
    for args, env in commands(deploy_file):
        consumed |= consumed_queues(args, env, app) or set()
    return routed_queues(app) - consumed
