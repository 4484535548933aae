"""Celery workers in deploy files, and the queues they consume (rule LK07).

One reading of "which queues does this deploy consume", shared by `loopkata scan`,
kata 07's reference guard and its hidden tests: the worker command lines of a
Procfile, a docker-compose file, Kubernetes manifests and systemd units, each
with the line it is on, and the queue options of a `celery ... worker` command.
A compose service behind `profiles` is not started by a default deploy
(`docker compose up`), so it consumes nothing.
The app's routes are read from the source without importing it (a scan must
not run a team's code).
"""
from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import bounded_yaml

DEFAULT_QUEUE = "celery"  # Celery's own default for task_default_queue
# Celery's command line reads an option it is not given from CELERY_<COMMAND>_<OPTION>
# (click's auto_envvar_prefix="CELERY"): CELERY_WORKER_QUEUES=a,b is -Q a,b.
QUEUES_VARIABLE = "CELERY_WORKER_QUEUES"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Command:
    """One process command found in a deploy file: its arguments and the line it is on.

    `profiles`: the compose profiles its service is behind. A service with profiles is not
    started by a plain `docker compose up`, only once one of them is enabled (`--profile`,
    COMPOSE_PROFILES): it consumes nothing in a default deploy. `service`: the compose
    service's name ('' elsewhere).
    """
    args: tuple[str, ...]
    line: int
    profiles: tuple[str, ...] = ()
    service: str = ""
    env: tuple[tuple[str, str], ...] = ()  # variables the deploy file sets for it (compose `environment`)
    script: str = ""  # the shell script it is written in, when a deploy file starts it through one

    def environment(self) -> dict[str, str]:
        """What the process is started with: its deploy file's variables, then any `NAME=value` before the command."""
        found = dict(self.env)
        for arg in self.args:
            name, sep, value = arg.partition("=")
            if not (sep and _ENV_NAME.fullmatch(name)):
                break
            found[name] = value
        return found

    @property
    def started_by_default(self) -> bool:
        """Does a default deploy start it (not behind a compose profile)?"""
        return not self.profiles

    def where(self) -> str:
        """'the service worker-schema (behind profiles: schema)', for a sentence."""
        behind = f" (behind profiles: {', '.join(self.profiles)})" if self.profiles else ""
        return f"the service {self.service}{behind}" if self.service else f"line {self.line}{behind}"


# --- a worker started through a shell script ----------------------------------------

_SCRIPT_SUFFIXES = (".sh", ".bash")
_WRAPPERS = {"exec", "env", "nohup"}


def script_path(args: tuple[str, ...] | list[str], folder: Path) -> Path | None:
    """The shell script a deploy file's command runs (`bin/worker.sh`, `sh ./bin/worker.sh`,
    `/app/bin/worker.sh` in a container), when it is a file under `folder`, the deploy file's."""
    rest = list(args)
    while rest and (rest[0] in _WRAPPERS or ("=" in rest[0] and _ENV_NAME.fullmatch(rest[0].partition("=")[0]))):
        rest = rest[1:]
    if len(rest) > 1 and Path(rest[0]).name in _SHELLS and not rest[1].startswith("-"):
        rest = rest[1:]
    if not rest or not rest[0].endswith(_SCRIPT_SUFFIXES):
        return None
    parts = [p for p in Path(rest[0]).parts if p not in ("/", ".")]
    top = folder.resolve()
    for start in range(len(parts)):  # /app/bin/worker.sh in the image is bin/worker.sh beside the deploy file
        candidate = folder.joinpath(*parts[start:])
        if ".." not in parts[start:] and candidate.is_file() and top in candidate.resolve().parents:
            return candidate
    return None


def script_commands(text: str) -> list[Command]:
    """The commands of a shell script, each with its line (continued lines joined) and the
    variables set before it (`export NAME=value`, `NAME=value`)."""
    found, env = [], {}
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        first, line = number + 1, lines[number]
        while line.rstrip().endswith("\\") and number + 1 < len(lines):
            number += 1
            line = line.rstrip()[:-1] + " " + lines[number]
        number += 1
        for part in re.split(r"&&|\|\||;", line):
            try:
                args = shlex.split(part, comments=True)
            except ValueError:  # unbalanced quotes: not a command we can read
                continue
            if args and args[0] == "export":
                args = args[1:]
                assigned = [a.partition("=") for a in args]
                env.update({name: value for name, sep, value in assigned if sep and _ENV_NAME.fullmatch(name)})
            elif args and all("=" in a and _ENV_NAME.fullmatch(a.partition("=")[0]) for a in args):
                env.update(a.partition("=")[::2] for a in args)
            elif args:
                found.append(Command(tuple(args), first, env=tuple(env.items())))
    return found


def celery_args(command: str | list) -> list[str] | None:
    """The arguments after `celery` in a command line, or None if it starts no Celery worker."""
    try:
        args = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    except ValueError:  # unbalanced quotes: not a command we can read
        return None
    for i, arg in enumerate(args):
        if Path(arg).name == "celery" or (arg == "celery" and i > 0 and args[i - 1] == "-m"):
            rest = args[i + 1:]
            return rest if "worker" in rest else None
    return None


def consumed_queues(command: str | list, default_queue: str = DEFAULT_QUEUE,
                    env: dict | None = None) -> set[str] | None:
    """The queues a `celery ... worker` command consumes; None if it is not a Celery worker.

    `env`: the variables it is started with (CELERY_WORKER_QUEUES stands for a missing -Q)."""
    args = celery_args(command)
    if args is None:
        return None
    env = env or {}
    listed = worker_option(args, "-Q", "--queues") or env.get(QUEUES_VARIABLE)
    excluded = _names(worker_option(args, "-X", "--exclude-queues") or env.get("CELERY_WORKER_EXCLUDE_QUEUES") or "")
    return (_names(listed) if listed else {default_queue}) - excluded  # no queue option: the default queue only


def worker_option(args: list[str], short: str, long: str) -> str | None:
    """A worker option's value (-Q a,b, -Qa,b, --queues=a,b, --queues a,b); the last one counts, as in Celery."""
    value = None
    for i, arg in enumerate(args):
        if arg in (short, long) and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(long + "="):
            value = arg.split("=", 1)[1]
        elif arg.startswith(short) and len(arg) > 2:
            value = arg[2:]
    return value


def _names(value: str) -> set[str]:
    return {q.strip() for q in value.split(",") if q.strip()}


# --- worker commands in deploy files ---------------------------------------------

_SHELLS = {"sh", "bash", "dash", "zsh", "ash"}


def _unwrap(args: list[str]) -> list[list[str]]:
    """`sh -c "a && celery ... worker"` runs several commands: each of them; else the command itself."""
    if args and Path(args[0]).name in _SHELLS and "-c" in args[:-1]:
        script = args[args.index("-c") + 1]
        parts = re.split(r"&&|\|\||;|\n", script)
        found = []
        for part in parts:
            try:
                found.append(shlex.split(part))
            except ValueError:
                continue
        return [p for p in found if p]
    return [args]


def _as_args(value) -> list[str] | None:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError:
            return None
    if isinstance(value, list):
        return [str(a) for a in value]
    return None


def _procfile(text: str) -> list[Command]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if ":" in line and not line.lstrip().startswith("#"):
            try:  # a Procfile command runs in a shell: `#` starts a comment
                args = shlex.split(line.split(":", 1)[1], comments=True)
            except ValueError:
                continue
            if args:
                found.append(Command(tuple(args), number))
    return found


def _systemd(text: str) -> list[Command]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        key, _, value = line.strip().partition("=")
        if key.strip() == "ExecStart":
            args = _as_args(value.strip().lstrip("-@:+!"))
            if args:
                found.append(Command(tuple(args), number))
    return found


def _yaml_nodes(text: str):
    """Every document of a YAML file as PyYAML nodes (they keep their line numbers); a file
    whose aliases expand it past a bound is refused (bounded_yaml.AliasBomb)."""
    return bounded_yaml.compose_all(text)


def _plain(node):
    return yaml.SafeLoader("").construct_object(node, deep=True) if node is not None else None


def _mapping(node) -> dict:
    """A mapping node's items by key, as nodes."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)}


def _compose_env(value) -> tuple[tuple[str, str], ...]:
    """A compose service's `environment`: a mapping, or a list of NAME=value (a bare NAME passes the host's on)."""
    if isinstance(value, dict):
        return tuple((str(k), "" if v is None else str(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple((str(item).partition("=")[0], str(item).partition("=")[2]) for item in value
                     if "=" in str(item))
    return ()


def _yaml(text: str) -> list[Command]:
    """Compose services' commands, and every container's command + args in Kubernetes manifests."""
    found = []
    for document in _yaml_nodes(text):
        top = _mapping(document)
        for name, service in _mapping(top.get("services")).items():
            fields = _mapping(service)
            node = fields.get("command")
            args = (_as_args(_plain(fields["entrypoint"])) or []) if "entrypoint" in fields else []
            args += _as_args(_plain(node)) or [] if node is not None else []
            profiles = _plain(fields.get("profiles")) or []
            profiles = tuple(str(p) for p in (profiles if isinstance(profiles, list) else [profiles]))
            if args:
                found.append(Command(tuple(args), (node or fields["entrypoint"]).start_mark.line + 1,
                                     profiles, str(name), _compose_env(_plain(fields.get("environment")))))
        stack = [document] if "kind" in top else []
        while stack:  # Kubernetes: containers may sit at any depth (Deployment, CronJob, Pod...)
            node = stack.pop()
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    if getattr(key, "value", None) in ("containers", "initContainers") \
                            and isinstance(value, yaml.SequenceNode):
                        for container in value.value:
                            fields = _mapping(container)
                            args = (_as_args(_plain(fields.get("command"))) or []) + \
                                   (_as_args(_plain(fields.get("args"))) or [])
                            where = fields.get("command") or fields.get("args")
                            if args and where is not None:
                                found.append(Command(tuple(args), where.start_mark.line + 1))
                    else:
                        stack.append(value)
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
    return found


def is_deploy_file(path: Path) -> bool:
    """Could `path` start processes: a Procfile, a YAML file, a systemd unit."""
    name = path.name
    return name == "Procfile" or name.startswith("Procfile.") or path.suffix in (".yml", ".yaml", ".service")


def commands(deploy_file: str | Path, text: str | None = None) -> list[Command]:
    """Every process command a deploy file starts, shell wrappers opened, each with its line.

    `text`: the file's content when the caller has already read it (the scan reads within a size limit)."""
    path = Path(deploy_file)
    if text is None:
        text = path.read_text(encoding="utf-8")
    if path.suffix in (".yml", ".yaml"):
        raw = _yaml(text)
    elif path.suffix == ".service":
        raw = _systemd(text)
    else:
        raw = _procfile(text)
    return [Command(tuple(args), c.line, c.profiles, c.service, c.env) for c in raw for args in _unwrap(list(c.args))]


def worker_commands(deploy_file: str | Path, *, dormant: bool = False, text: str | None = None) -> list[Command]:
    """The commands in `deploy_file` that start a Celery worker in a default deploy.

    With `dormant`, those it names but does not start by default instead: compose services
    behind `profiles`, which a plain `docker compose up` leaves out."""
    return [c for c in commands(deploy_file, text)
            if celery_args(list(c.args)) is not None and c.started_by_default != dormant]


# --- routes, read from the source --------------------------------------------------

@dataclass(frozen=True)
class Routes:
    """What a Celery configuration routes: the queues its routes name, its default queue, where task_routes is set."""
    queues: set[str]
    default_queue: str
    where: tuple[str, int] | None  # the task_routes setting


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level NAME = "string" assignments (a queue name is often kept in one)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value.value
    return found


def _string(node, constants: dict) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _route_queues(node, constants: dict) -> list[str]:
    """The queues named by a task_routes value: a dict of pattern -> {"queue": q} or q, or a list of those."""
    tables = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    found = []
    for table in tables:
        if not isinstance(table, ast.Dict):
            continue
        for route in table.values:
            if isinstance(route, ast.Dict):
                for key, value in zip(route.keys, route.values):
                    if key is not None and _string(key, constants) == "queue":
                        queue = _string(value, constants)
                        if queue:
                            found.append(queue)
            else:
                queue = _string(route, constants)
                if queue:
                    found.append(queue)
    return found


def _settings(tree: ast.Module):
    """(name, value node) of every Celery setting given in this module:
    `app.conf.update(name=...)`, `app.conf.name = ...`, `Celery(..., name=...)`,
    and a celeryconfig module's top-level `name = ...`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            is_update = isinstance(func, ast.Attribute) and func.attr == "update" \
                and isinstance(func.value, ast.Attribute) and func.value.attr == "conf"
            is_app = (isinstance(func, ast.Name) and func.id == "Celery") or \
                (isinstance(func, ast.Attribute) and func.attr == "Celery")
            if is_update or is_app:
                for keyword in node.keywords:
                    if keyword.arg:
                        yield keyword.arg, keyword.value
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute) \
                        and target.value.attr == "conf":
                    yield target.attr, node.value
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in ("task_routes", "task_default_queue"):
                    yield target.id, node.value


def routes_in(tree: ast.Module, filename: str) -> Routes | None:
    """The routes a module configures, or None if it sets no task_routes."""
    constants = _constants(tree)
    queues, default, where = set(), None, None
    for name, value in _settings(tree):
        if name == "task_routes":
            where = (filename, value.lineno)
            queues.update(_route_queues(value, constants))
        elif name == "task_default_queue":
            default = _string(value, constants) or default
    if where is None:
        return None
    return Routes(queues, default or DEFAULT_QUEUE, where)


def _through_scripts(deploy_file: Path, found: list[Command], read_script) -> list[Command]:
    """The commands, with each one that runs a shell script of the tree replaced by the script's
    commands: they run with the deploy file's variables for it, then the script's own."""
    opened = []
    for command in found:
        script = script_path(command.args, deploy_file.parent) if celery_args(list(command.args)) is None else None
        text = read_script(script) if script else None
        if text is None:
            opened.append(command)
            continue
        outer = command.environment()
        opened += [Command(inner.args, inner.line, command.profiles, command.service,
                           tuple({**outer, **dict(inner.env)}.items()), str(script))
                   for inner in script_commands(text)]
    return opened


def consumed_by_file(deploy_file: str | Path, default_queue: str = DEFAULT_QUEUE,
                     text: str | None = None, read_script=None) -> tuple[set[str], list[Command]]:
    """The queues that the Celery workers `deploy_file` starts by default consume, together, and its workers.

    A compose service behind `profiles` is not started by a plain `docker compose up`, so its
    queues count as consumed by nobody. It is still among the workers returned, first: a queue
    left without a consumer most likely went with it, so that is the line to point at.
    `read_script(path)`: the text of a shell script of the tree that a command runs (None when
    it cannot be read); its worker lines are then read as the deploy file's.
    """
    found = commands(deploy_file, text)
    if read_script is not None:
        found = _through_scripts(Path(deploy_file), found, read_script)
    workers = [c for c in found if celery_args(list(c.args)) is not None]
    started = [c for c in workers if c.started_by_default]
    dormant = [c for c in workers if not c.started_by_default]
    consumed = set()
    for worker in started:
        consumed |= consumed_queues(list(worker.args), default_queue, worker.environment()) or set()
    return consumed, dormant + started
