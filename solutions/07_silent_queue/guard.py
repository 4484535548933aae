"""The deploy guard: CI runs it on every deploy file and fails the build if a queue has no consumer.

A task routed to a queue that no worker consumes is accepted, gets a job id,
and is never run; nothing logs anything. This guard reads every Celery worker
a deploy file starts and the app's routes, and names the queues left without one.
"""
import re
import shlex
from pathlib import Path

import yaml

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
    if "worker" not in args or not any(Path(a).name == "celery" for a in args[:args.index("worker")]):
        return None
    try:
        value = option(args, "-Q", "--queues")
        excluded = option(args, "-X", "--exclude-queues") or env.get("CELERY_WORKER_EXCLUDE_QUEUES") or ""
    except NoValue:
        return set()  # Celery refuses the command line: no worker starts, and nothing is consumed
    if value is None:  # Celery reads a missing option from CELERY_<COMMAND>_<OPTION>
        value = env.get("CELERY_WORKER_QUEUES") or None
    excluded = set(excluded.split(",")) if excluded else set()
    if value is not None:
        return set(value.split(",")) - excluded  # commas only, as Celery splits: "a, b" names 'a' and ' b'
    if app.conf.task_queues:  # no queue option: every queue the app declares...
        return {q.name for q in app.conf.task_queues} - excluded
    return {app.conf.task_default_queue} - excluded  # ...or else its default queue only


class NoValue(ValueError):
    """A worker option given last, with no value after it."""


def option(args: list, short: str, long: str) -> str | None:
    """The value of a worker option (-Q a,b, -Qa,b, --queues=a,b, --queues a,b); the last one counts, as in Celery."""
    value = None
    for i, arg in enumerate(args):
        if arg in (short, long):
            if i + 1 == len(args):
                raise NoValue(f"{arg} has no value")
            value = args[i + 1]
        elif arg.startswith(long + "="):
            value = arg.split("=", 1)[1]
        elif arg.startswith(short) and len(arg) > 2:
            value = arg[2:]
    return value


def unconsumed_queues(app, deploy_file) -> set:
    """The queues `app` routes tasks to that no worker in `deploy_file` consumes."""
    consumed = set()
    for args, env in commands(deploy_file):
        consumed |= consumed_queues(args, env, app) or set()
    return routed_queues(app) - consumed
