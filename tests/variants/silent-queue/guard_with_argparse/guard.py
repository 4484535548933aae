"""The deploy guard: every queue the app routes to must have a worker in each deploy file."""
import argparse
import itertools
import re
import shlex
from pathlib import Path

import yaml

_options = argparse.ArgumentParser(add_help=False)
_options.add_argument("-Q", "--queues", default=None)
_options.add_argument("-X", "--exclude-queues", default="")
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=")


def _worker_args(deploy_file):
    path = Path(deploy_file)
    if path.suffix in (".yml", ".yaml"):
        services = yaml.safe_load(path.read_text()).get("services", {})
        raw = [(svc.get("command"), svc.get("environment") or {}) for svc in services.values()
               if svc and svc.get("command") and not svc.get("profiles")]  # `docker compose up` skips profiles
    else:
        # One command per process type, as a platform reads it: a later line replaces an earlier one.
        raw = [(c, {}) for c in dict(re.findall(r"^([\w-]+):\s*(.+)$", path.read_text(), re.MULTILINE)).values()]
    for command, env in raw:
        env = dict(e.split("=", 1) for e in env if "=" in e) if isinstance(env, list) else dict(env)
        args = shlex.split(command, comments=True) if isinstance(command, str) else list(map(str, command))
        env |= dict(a.split("=", 1) for a in itertools.takewhile(_ASSIGNMENT.match, args))  # NAME=value cmd
        if "worker" in args and any(a.endswith("celery") for a in args):
            yield args[args.index("worker") + 1:], env


def _routed(app):
    routes = app.conf.task_routes or {}
    for table in routes if isinstance(routes, (list, tuple)) else [routes]:
        for route in table.values() if isinstance(table, dict) else ():
            yield route["queue"] if isinstance(route, dict) else route


def unconsumed_queues(app, deploy_file) -> set:
    default = app.conf.task_default_queue
    wanted = {default} | set(_routed(app))
    have = set()
    for args, env in _worker_args(deploy_file):
        parsed, _ = _options.parse_known_args(args)
        queues = parsed.queues or env.get("CELERY_WORKER_QUEUES")  # Celery reads a missing -Q from there
        declared = {q.name for q in app.conf.task_queues or ()} or {default}  # what a worker with no -Q reads
        excluded = set(filter(None, parsed.exclude_queues.split(",")))
        have |= (set(queues.split(",")) if queues else declared) - excluded
    return wanted - have
