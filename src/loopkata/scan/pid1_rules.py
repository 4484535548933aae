"""LK14: a container whose PID 1 is a shell that runs the Python service as its child.

Inside a container, PID 1 gets no signal it has no handler for: the kernel drops
it. `docker stop` (and a pod's termination) sends SIGTERM to PID 1 alone, waits
out the grace period, then kills everything with SIGKILL. When PID 1 is a shell
(`sh` is dash on Debian-based images, and it keeps itself as the parent of the
last command it runs), the service never hears SIGTERM, and its shutdown code
never runs.

Read here:

- Dockerfiles (`Dockerfile`, `Dockerfile.*`, `*.Dockerfile`, `Containerfile`):
  a CMD or ENTRYPOINT in shell form (`CMD python app.py`, which Docker runs as
  `/bin/sh -c "python app.py"`), or in exec form through `sh -c "python ..."`,
  whose last command starts Python without `exec`;
- entrypoint scripts: the ones a Dockerfile's ENTRYPOINT or CMD runs (found
  beside the Dockerfile through its COPY lines or the path's tail), and shell
  scripts named like entrypoints (`*entrypoint*`, `*entrypoint*.sh`) anywhere
  in the tree. Their last command starts Python as the shell's child (no
  `exec`), or starts it in the background and waits without a trap that
  forwards SIGTERM, or with a trap whose single `wait` returns as soon as the
  trap has run, so the script (PID 1) ends and the kernel kills the service
  mid-shutdown; under `set -e` (or `#!/bin/sh -e`), a first `wait` not followed
  by `|| ...` ends the script the same way, since the signal makes it return
  143; or their last command pipes Python into another program (`exec python
  app.py | tee log`: each part of a pipeline is the shell's child).

Clean: `exec python ...`, `exec "$@"`, a trap that forwards SIGTERM and waits
until the child has exited, a Dockerfile whose ENTRYPOINT is an init that
signals the whole process group (`dumb-init`, `tini -g`), and `SHELL
["/bin/bash", "-c"]` with a lone command (bash replaces itself with it).

Only names and text are read: nothing is run, so a script that is not a file
of the tree is not judged.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

SHELLS = {"sh", "bash", "dash", "ash", "zsh", "ksh", "busybox"}
_PYTHON = re.compile(r"(python|pypy)(\d+(\.\d+)?)?")
SERVERS = {"uvicorn", "gunicorn", "hypercorn", "daphne", "granian", "celery", "dramatiq", "arq", "faust", "rq",
           "huey_consumer", "flask", "fastapi", "django-admin", "aiohttp"}
# Programs that run the next one as a child or replace themselves with it: what they start is the program.
# name -> how many arguments of their own follow them before the program (besides options)
WRAPPERS = {"env": 0, "nice": 0, "ionice": 0, "nohup": 0, "timeout": 1, "gosu": 1, "su-exec": 1,
            "s6-setuidgid": 1, "setpriv": 0, "chpst": 0, "tini": 0, "tini-static": 0, "dumb-init": 0,
            "catatonit": 0, "ddtrace-run": 0, "opentelemetry-instrument": 0, "stdbuf": 0, "xvfb-run": 0}
RUNNERS = {"poetry", "uv", "pipenv", "pdm", "hatch", "rye"}  # `poetry run python app.py`
GROUP_INITS = {"dumb-init"}  # an init that signals its child's whole process group by default
_KEYWORDS = {"if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac", "{", "}",
             "!", "function", ";;", "(", ")"}
_QUIET = {"echo", "printf", "true", ":", "exit", "return", "logger", "sync"}  # harmless after the service
SEARCH_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")  # images' PATH
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def is_dockerfile(path: Path) -> bool:
    name = path.name
    return name in ("Dockerfile", "Containerfile") or name.startswith(("Dockerfile.", "Containerfile.")) \
        or name.endswith((".Dockerfile", ".dockerfile", ".Containerfile"))


def is_entrypoint_script(path: Path) -> bool:
    return "entrypoint" in path.name.lower() and path.suffix in ("", ".sh", ".bash")


def is_container_file(path: Path) -> bool:
    """Does the scan read this file for LK14, when it meets it in a folder?"""
    return is_dockerfile(path) or is_entrypoint_script(path)


# --- shell text: commands with their lines ----------------------------------------------


@dataclass
class Command:
    line: int
    args: list[str]
    background: bool = False  # ended by `&`
    keyword: str = ""  # a shell keyword (if, fi, ;;, ...) or "" for a command
    loop_depth: int = 0  # inside how many while/until/for loops
    in_function: bool = False
    sep: str = ""  # what ends it: "\n", ";", "&&", "||", "|" or "&"

    @property
    def exec(self) -> bool:
        return bool(self.args) and self.args[0] == "exec"


def _segments(text: str) -> Iterator[tuple[int, str, str]]:
    """(line, text, separator) for each simple command of a shell text, split at newlines, `;`, `;;`,
    `&&`, `||`, `|` and `&` outside quotes, comments and here-documents left out."""
    line, start_line, buf, quote, i = 1, 1, [], "", 0
    heredocs: list[str] = []
    n = len(text)

    def flush(sep: str):
        nonlocal buf, start_line
        piece = "".join(buf).strip()
        buf = []
        found = (start_line, piece, sep)
        start_line = line
        return found

    while i < n:
        c = text[i]
        if quote:
            buf.append(c)
            if c == "\\" and quote == '"' and i + 1 < n:
                buf.append(text[i + 1])
                line += text[i + 1] == "\n"
                i += 2
                continue
            if c == quote:
                quote = ""
            line += c == "\n"
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":  # a continued line
                line += 1
                buf.append(" ")
            else:
                buf.extend(text[i:i + 2])
            i += 2
            continue
        if c in "'\"":
            quote = c
            buf.append(c)
            i += 1
            continue
        if c == "#" and (not buf or buf[-1] in " \t;&|("):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            piece = "".join(buf)
            heredocs += [m.group(2) for m in _HEREDOC.finditer(piece)]
            yield flush("\n")
            line += 1
            i += 1
            start_line = line
            while heredocs:  # skip the here-document's body, up to its delimiter line
                end = text.find("\n", i)
                body_line = text[i:] if end < 0 else text[i:end]
                i = n if end < 0 else end + 1
                line += 1
                if body_line.strip() == heredocs[0]:
                    heredocs.pop(0)
                if i >= n:
                    break
            start_line = line
            continue
        if c == ";":
            sep = ";;" if text.startswith(";;", i) else ";"
            yield flush(sep)
            i += len(sep)
            continue
        if c in "&|":
            double = text.startswith(c * 2, i)
            if c == "&" and i + 1 < n and text[i + 1] == ">" or (c == "&" and buf and buf[-1] in "<>"):
                buf.append(c)  # &> and 2>&1 are redirections
                i += 1
                continue
            yield flush(c * 2 if double else c)
            i += 2 if double else 1
            continue
        buf.append(c)
        i += 1
    if buf:
        yield flush("")


def _assignments(args: list[str]) -> bool:
    return all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", a, re.DOTALL) for a in args)


def commands(text: str) -> list[Command]:
    """The script's simple commands and keywords in order, each with its line."""
    found: list[Command] = []
    loops = 0  # inside how many while/until/for ... done
    blocks: list[str] = []  # "f" for a function's body, "g" for a { ... } group
    pending_function, case_depth = False, 0
    for line, piece, sep in _segments(text):
        try:
            args = shlex.split(piece, posix=True) if piece else []
        except ValueError:  # unbalanced quotes: not a command we can read
            args = []
        while args:
            word = args[0]
            if case_depth and word.endswith(")") and not word.startswith("$("):
                args = args[1:]  # a case pattern: `web)`
                continue
            if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]*\(\)", word) or word == "function" \
                    or (len(args) > 1 and args[1] == "()"):
                pending_function = True  # name() { ... }
                args = ["{"] if "{" in args else []
                continue
            if word in _KEYWORDS:
                if word in ("while", "until", "for"):
                    loops += 1
                elif word == "done":
                    loops = max(0, loops - 1)
                elif word == "case":
                    case_depth += 1
                elif word == "esac":
                    case_depth = max(0, case_depth - 1)
                elif word == "{":
                    blocks.append("f" if pending_function else "g")
                    pending_function = False
                elif word == "}" and blocks:
                    blocks.pop()
                found.append(Command(line, [], keyword=word, loop_depth=loops, in_function="f" in blocks))
                if word in ("if", "elif", "while", "until", "for", "case"):
                    args = []  # the condition: not the service
                    break
                args = args[1:]
                continue
            break
        if args:
            found.append(Command(line, args, background=sep == "&", loop_depth=loops, in_function="f" in blocks,
                                 sep=sep))
        if sep == ";;":
            found.append(Command(line, [], keyword=";;", loop_depth=loops, in_function="f" in blocks))
    return found


def _program(args: list[str]) -> list[str]:
    """The arguments from the program that really runs: past `exec`, `NAME=value`, wrappers and runners."""
    rest = list(args)
    while rest:
        word = rest[0]
        name = PurePosixPath(word).name
        if word == "exec" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            rest = rest[1:]
        elif name in WRAPPERS:
            rest = rest[1:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
                if rest and rest and rest[0] == "--":
                    break
            if rest and rest[0] == "--":
                rest = rest[1:]
            while rest and name == "env" and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", rest[0]):
                rest = rest[1:]
            rest = rest[WRAPPERS[name]:]
        elif name in RUNNERS and len(rest) > 1 and rest[1] == "run":
            rest = rest[2:]
            while rest and rest[0].startswith("-"):
                rest = rest[1:]
        else:
            break
    return rest


def starts_python(args: list[str]) -> bool:
    program = _program(args)
    if not program:
        return False
    name = PurePosixPath(program[0]).name
    return bool(_PYTHON.fullmatch(name)) or name in SERVERS or name.endswith(".py")


def _inline_script(args: list[str]) -> tuple[str, str] | None:
    """(shell, text) of `sh -c "text"` (past exec and wrappers), or None."""
    program = _program(args)
    if len(program) > 2 and PurePosixPath(program[0]).name in SHELLS and "-c" in program[1:-1]:
        return PurePosixPath(program[0]).name, program[program.index("-c") + 1]
    return None


def _shown(args: list[str]) -> str:
    text = " ".join(shlex.quote(a) if a and not a.startswith("$") else a for a in _program(args))
    return text if len(text) <= 60 else text[:57] + "..."


# --- what runs last ---------------------------------------------------------------------


def _branch_ends(items: list[Command]) -> dict[int, int]:
    """For each `else`, `elif` and `;;`: the index of the `fi` or `esac` that ends its if or case
    (past the end when none does), found in one pass."""
    ends: dict[int, int] = {}
    frames: list[tuple[str, list[int]]] = []
    for j, item in enumerate(items):
        word = item.keyword
        if word in ("if", "case"):
            frames.append((word, []))
        elif word in ("else", "elif", ";;") and frames:
            frames[-1][1].append(j)
        elif word in ("fi", "esac") and frames:
            _, pending = frames.pop()
            ends.update((k, j) for k in pending)
    for _, pending in frames:
        ends.update((k, len(items)) for k in pending)
    return ends


def _next_run(items: list[Command], i: int, ends: dict[int, int]) -> int | None:
    """The index of the next command that runs after items[i] (other branches skipped), or None."""
    j = i + 1
    while j < len(items):
        item = items[j]
        if item.keyword in ("else", "elif", ";;"):
            j = ends.get(j, j) + 1
        elif item.keyword or item.in_function or PurePosixPath(item.args[0]).name in _QUIET \
                or _assignments(item.args):
            j += 1
        else:
            return j
    return None


@dataclass
class Problem:
    line: int
    message: str


def _forwarding_trap(items: list[Command]) -> Command | None:
    """A `trap '... kill ...' TERM` in the script."""
    for item in items:
        if item.args[:1] == ["trap"] and len(item.args) > 2 and "kill" in item.args[1] and any(
                s.upper().removeprefix("SIG") in ("TERM", "15") for s in item.args[2:]):
            return item
    return None


def shell_problems(text: str, shell: str = "sh", lone_is_exec: bool = False) -> list[Problem]:
    """What keeps the Python service from getting SIGTERM in a shell text run as PID 1.
    `lone_is_exec`: the shell replaces itself with a lone command (bash -c "cmd")."""
    items = [c for c in commands(text) if c.keyword or c.args]
    runnable = [i for i, c in enumerate(items) if not c.keyword and not c.in_function]
    problems: list[Problem] = []
    if lone_is_exec and len(runnable) == 1 and not items[runnable[0]].background:
        items[runnable[0]].args = ["exec", *items[runnable[0]].args]
    waits = [i for i, c in enumerate(items) if c.args[:1] == ["wait"]]
    trap = _forwarding_trap(items)
    ends = _branch_ends(items)
    for i in runnable:
        item = items[i]
        inline = _inline_script(item.args)
        if inline is None and not starts_python(item.args):
            continue  # cheap first: only what starts Python is followed to the end of the script
        if item.sep == "|" and not item.loop_depth and starts_python(item.args):
            last = i
            while last + 1 < len(items) and items[last].sep == "|":
                last += 1
            if _next_run(items, last, ends) is None and not items[last].background:
                problems.append(Problem(item.line, (
                    f"the last command pipes `{_shown(item.args)}` into `{_shown(items[last].args)}`: every part of a "
                    "pipeline runs as a child of the shell (an `exec` inside one replaces only that child), so the "
                    "shell stays PID 1 of the container and drops SIGTERM; the service is killed with SIGKILL after "
                    f"the grace period, its shutdown never run: `exec {_shown(item.args)}` with no pipe (the platform "
                    "keeps its output), or redirect the shell's output first (bash: `exec > >(tee FILE) 2>&1`)")))
            continue
        if not item.background and (item.loop_depth or _next_run(items, i, ends) is not None):
            continue
        if item.background:
            if starts_python(item.args):
                later = [w for w in waits if w > i]
                problems += _background(items, i, [items[w] for w in later], trap,
                                        _errexit(text, items, later[0]) if later else False)
        elif inline is not None:
            inner_shell, inner = inline
            inner_problems = shell_problems(inner, inner_shell, lone_is_exec=inner_shell in ("bash", "zsh", "ksh"))
            if not item.exec and any(starts_python(c.args) for c in commands(inner) if c.args):
                problems.append(Problem(item.line, (
                    f"the last command runs `{_shown(item.args)}` as a child of this shell, which stays PID 1 of the "
                    "container and drops SIGTERM; the service never hears `docker stop` and is killed with SIGKILL "
                    f"after the grace period: `exec` the service itself ({_suggest(inner)})")))
            elif inner_problems:
                problems.append(Problem(item.line, inner_problems[0].message))
        elif starts_python(item.args) and not item.exec:
            problems.append(Problem(item.line, (
                f"the script's last command starts `{_shown(item.args)}` as a child of the shell, which stays PID 1 "
                "of the container (or the one process an init such as tini signals): PID 1 gets no signal it has no "
                "handler for, so SIGTERM from `docker stop` (or a pod's termination) never reaches the service, which "
                "is killed with SIGKILL once the grace period is over (or at once, when PID 1 ends first), its "
                "shutdown never run; use "
                f"`exec {_shown(item.args)}` so that it replaces the shell")))
    return problems


def _suggest(inner: str) -> str:
    runs = [c for c in commands(inner) if c.args and not c.keyword]
    return f"exec {_shown(runs[-1].args)}" if runs else "exec python ..."


def _errexit(text: str, items: list[Command], upto: int) -> bool:
    """Is `set -e` (errexit) on when items[upto] runs: from the script's #! line, then each `set` before it?"""
    first = text.lstrip("\n").split("\n", 1)[0]
    on = first.startswith("#!") and any(re.fullmatch(r"-[a-zA-Z]*e[a-zA-Z]*", w) for w in first.split()[1:])
    for item in items[:upto]:
        if item.args[:1] != ["set"] or item.in_function:
            continue
        args = item.args[1:]
        for n, arg in enumerate(args):
            if arg in ("-o", "+o") and n + 1 < len(args) and args[n + 1] == "errexit":
                on = arg == "-o"
            elif re.fullmatch(r"[-+][a-zA-Z]*e[a-zA-Z]*", arg):
                on = arg.startswith("-")
    return on


def _background(items: list[Command], i: int, waits: list[Command], trap: Command | None,
                errexit: bool = False) -> list[Problem]:
    service = items[i]
    if not waits:
        return []  # what the script runs after it is the main process; not judged here
    if trap is None:
        return [Problem(service.line, (
            f"`{_shown(service.args)}` runs in the background under the shell, which is PID 1 of the container and "
            "has no trap for TERM: SIGTERM from `docker stop` is dropped, `wait` goes on, and the service is killed "
            f"with SIGKILL after the grace period; `exec {_shown(service.args)}` instead, or trap TERM, forward it "
            "to the child and wait until it has exited")), ]
    if "wait" in trap.args[1]:
        return []
    if errexit and waits[0].sep not in ("||", "&&"):
        return [Problem(waits[0].line, (
            "the trap forwards SIGTERM, but under `set -e` this `wait` ends the script: interrupted by the signal, it "
            "returns 143 (128 + SIGTERM), and errexit stops the shell before any `wait` after it, so PID 1 is gone "
            "and the kernel kills the service with SIGKILL mid-shutdown; write `wait \"$child\" || true` before "
            "waiting again, or wait inside the trap, or `exec` the service"))]
    if len(waits) > 1 or any(w.loop_depth > service.loop_depth for w in waits):
        return []
    return [Problem(waits[-1].line, (
        "the trap forwards SIGTERM, but this `wait` returns as soon as the trap has run, before the service has "
        "stopped: the script ends, and once PID 1 is gone the kernel kills the service with SIGKILL mid-shutdown; "
        "wait for the child again after the trap (a second `wait \"$child\"`, or a loop; under `set -e`, "
        "`wait \"$child\" || true` first), or `exec` the service"))]


# --- Dockerfiles -------------------------------------------------------------------------


@dataclass
class Instruction:
    line: int
    keyword: str
    rest: str

    def exec_form(self) -> list[str] | None:
        text = self.rest.strip()
        if not text.startswith("["):
            return None
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            return None  # not valid JSON (or nested past reading): Docker runs it in shell form
        return [str(v) for v in value] if isinstance(value, list) else None


@dataclass
class Stage:
    instructions: list[Instruction] = field(default_factory=list)

    def last(self, keyword: str) -> Instruction | None:
        found = [i for i in self.instructions if i.keyword == keyword]
        return found[-1] if found else None


def stages(text: str) -> list[Stage]:
    """The Dockerfile's build stages, each with its instructions (continued lines joined, comments and
    here-documents left out), each on the line it starts."""
    found = [Stage()]
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        first = number + 1
        line = lines[number]
        number += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [line.rstrip()]
        while parts[-1].endswith("\\") and number < len(lines):
            parts[-1] = parts[-1][:-1]
            nxt = lines[number]
            number += 1
            if nxt.lstrip().startswith("#"):  # comment lines inside an instruction are left out
                parts.append("\\")
                continue
            parts.append(nxt.rstrip())
        joined = " ".join(p for p in parts if p != "\\")
        keyword, _, rest = joined.strip().partition(" ")
        keyword = keyword.upper()
        for delimiter in [m.group(2) for m in _HEREDOC.finditer(rest)] if keyword in ("RUN", "COPY") else []:
            while number < len(lines) and lines[number].strip() != delimiter:
                number += 1
            number += 1
        if keyword == "FROM" and found[-1].instructions:
            found.append(Stage())
        found[-1].instructions.append(Instruction(first, keyword, rest.strip()))
    return [s for s in found if s.instructions]


def _copies(stage: Stage) -> list[tuple[list[str], str]]:
    """(sources, destination) of the stage's COPY and ADD lines from the build context."""
    found = []
    for ins in stage.instructions:
        if ins.keyword not in ("COPY", "ADD"):
            continue
        args = ins.exec_form()
        if args is None:
            try:
                args = shlex.split(ins.rest)
            except ValueError:
                continue
        if any(a.startswith("--from") for a in args):
            continue
        args = [a for a in args if not a.startswith("--")]
        if len(args) >= 2:
            found.append((args[:-1], args[-1]))
    return found


def _workdir(stage: Stage, before: int) -> str:
    folder = "/"
    for ins in stage.instructions:
        if ins.keyword == "WORKDIR" and ins.line < before:
            folder = str(PurePosixPath(folder) / ins.rest.strip().strip('"'))
    return folder


def _inside(context: Path, candidate: Path) -> bool:
    try:
        return candidate.is_file() and context.resolve() in candidate.resolve().parents
    except OSError:
        return False


def script_file(program: str, stage: Stage, context: Path, line: int) -> Path | None:
    """The file of the build context that the image runs as `program` (`/app/entrypoint.sh`, `./start.sh`,
    `docker-entrypoint.sh` copied to /usr/local/bin), or None."""
    if "$" in program:
        return None
    # `start` is looked up on PATH; `./start.sh` and `bin/start.sh` from the working directory
    image_paths = [PurePosixPath(_workdir(stage, line)) / program] if "/" in program else \
        [PurePosixPath(folder) / program for folder in SEARCH_PATH]
    for (sources, dest), image_path in ((c, i) for c in _copies(stage) for i in image_paths):
        dest_path = PurePosixPath(_workdir(stage, line)) / dest
        for source in sources:
            if len(sources) == 1 and not dest.endswith("/") and image_path == dest_path and (
                    candidate := context / source).is_file():
                pass
            elif source.rstrip("/") in (".", "") or (context / source).is_dir():
                try:
                    candidate = context / source / image_path.relative_to(dest_path)
                except ValueError:
                    continue
            elif image_path == dest_path / PurePosixPath(source).name:
                candidate = context / source
            else:
                continue
            if _inside(context, candidate):
                return candidate
    parts = [p for p in PurePosixPath(program).parts if p not in ("/", ".", "..")]
    for start in range(len(parts)):  # /app/bin/start.sh in the image is bin/start.sh in the context
        candidate = context.joinpath(*parts[start:])
        if _inside(context, candidate):
            return candidate
    return None


def _past_inits(args: list[str]) -> tuple[list[str], bool]:
    """The arguments past an init at their head (tini, dumb-init), and whether it signals the whole group."""
    rest, group = list(args), False
    while rest and PurePosixPath(rest[0]).name in ("tini", "tini-static", "dumb-init", "catatonit"):
        name = PurePosixPath(rest[0]).name
        rest = rest[1:]
        options = []
        while rest and rest[0].startswith("-") and rest[0] != "--":
            options.append(rest[0])
            rest = rest[1:]
        if rest and rest[0] == "--":
            rest = rest[1:]
        group = group or (name in GROUP_INITS and "--single-child" not in options and "-c" not in options) \
            or (name != "dumb-init" and "-g" in options)
    return rest, group


def _script_of(args: list[str], stage: Stage, context: Path, line: int) -> Path | None:
    """The script an exec-form command runs (`/entrypoint.sh`, `sh /app/entrypoint.sh`)."""
    program = _program(args)
    if len(program) > 1 and PurePosixPath(program[0]).name in SHELLS and not program[1].startswith("-"):
        program = program[1:]
    elif program and PurePosixPath(program[0]).name in SHELLS:
        options = [a for a in program[1:] if a.startswith("-")]
        rest = [a for a in program[1:] if not a.startswith("-")]
        program = rest if rest and "-c" not in options else []
    if not program or starts_python(program):
        return None
    return script_file(program[0], stage, context, line)


@dataclass
class Finding:
    path: Path
    line: int
    message: str


def check_dockerfile(path: Path, text: str, read: Callable[[Path], str | None],
                     scripts: dict[Path, tuple[Path, bool]]) -> Iterator[Finding]:
    """LK14 in one Dockerfile. `scripts`: each entrypoint script it runs (by its resolved path), and
    whether an init signals the script's whole process group (then its children hear SIGTERM too)."""
    context = path.parent

    def runs_script(script: Path | None, group: bool) -> None:
        if script is not None:
            key = script.resolve()
            scripts[key] = (script, scripts.get(key, (script, False))[1] or group)

    for stage in stages(text):
        shell = stage.last("SHELL")
        shell_args = (shell.exec_form() if shell else None) or ["/bin/sh", "-c"]
        shell_name = PurePosixPath(shell_args[0]).name
        entry, cmd = stage.last("ENTRYPOINT"), stage.last("CMD")
        entry_args = entry.exec_form() if entry else None
        group = _past_inits(entry_args)[1] if entry_args else False
        for ins in (entry, cmd):
            if ins is None or (ins is cmd and entry is not None and entry_args is None):
                continue  # a shell-form ENTRYPOINT ignores CMD
            args = ins.exec_form()
            if args is None:  # shell form: Docker runs SHELL + [the text]
                inline: tuple[str, str] | None = (shell_name, ins.rest)
                past, own_group = [], False
            else:
                past, own_group = _past_inits(args)
                inline = _inline_script(past)
            if inline is not None:
                inner_shell, inner = inline
                runs = [c for c in commands(inner) if c.args and not c.keyword and not c.in_function]
                last = runs[-1] if runs else None
                script = _script_of(last.args, stage, context, ins.line) if last else None
                runs_script(script, group or own_group)
                lone = inner_shell in ("bash", "zsh", "ksh") and len(runs) == 1 and not last.background
                if group or own_group or last is None or last.exec or lone:
                    continue
                reaches = shell_problems(inner, inner_shell) or starts_python(last.args) or (
                    script is not None and _starts_python_somewhere(read(script)))
                if not reaches:
                    continue
                said = "; ".join(piece for _, piece, _ in _segments(inner) if piece)  # comments left out
                if args is None:
                    message = (f"{ins.keyword} in shell form runs `{shell_name} -c \"{said}\"`: the shell is PID 1 "
                               "of the container and the service its child (dash, the /bin/sh of Debian-based "
                               "images, does not replace itself with a lone command)")
                else:
                    message = (f"{ins.keyword} runs `{_shown(past)}`: that shell is PID 1 of the container and the "
                               "service its child")
                yield Finding(path, ins.line, (
                    f"{message}, so SIGTERM from `docker stop` is dropped and the service is killed with SIGKILL "
                    f"after the grace period; write it in exec form, {ins.keyword} "
                    f"{json.dumps(_program(last.args))}, or `exec` the service inside the string"))
                continue
            runs_script(_script_of(past, stage, context, ins.line), group or own_group)


def _starts_python_somewhere(text: str | None) -> bool:
    return text is not None and any(starts_python(c.args) or _inline_script(c.args) for c in commands(text) if c.args)


def _is_shell_script(path: Path, text: str) -> bool:
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        return any(PurePosixPath(w).name in SHELLS for w in first[2:].split())
    return path.suffix in (".sh", ".bash")


def _names_it(text: str, name: str) -> bool:
    """Does a deploy file's text name this file (`/app/entrypoint.sh`, `"./entrypoint.sh"`), not a longer one?"""
    return re.search(rf"(?:^|[\s/\"'\[=:,]){re.escape(name)}(?:$|[\s\"'\],;])", text, re.MULTILINE) is not None


def check(container_files: dict[Path, str], read: Callable[[Path], str | None],
          deploy_files: Mapping[Path, str] | None = None) -> Iterator[Finding]:
    """LK14 across the container files found (Dockerfiles, scripts named like entrypoints) and the scripts
    the Dockerfiles run, read through `read` (None for a script that could not be read).

    A script found by its name alone is judged when no Dockerfile found builds it (a compose file or a
    manifest may run it), or when a deploy file of its tree (`deploy_files`) names it: beside a Dockerfile that runs
    something else, it is a file the image does not start."""
    scripts: dict[Path, tuple[Path, bool]] = {}
    builds: list[Path] = []
    for path, text in container_files.items():
        if is_dockerfile(path):
            builds.append(path.parent.resolve())
            yield from check_dockerfile(path, text, read, scripts)
    deploys = [(deploy.parent.resolve(), text) for deploy, text in (deploy_files or {}).items()]
    for path in container_files:
        key = path.resolve()
        if is_dockerfile(path) or key in scripts:
            continue
        built = any(folder == key.parent or folder in key.parents for folder in builds)
        if not built or any((folder == key.parent or folder in key.parents) and _names_it(text, path.name)
                            for folder, text in deploys):
            scripts[key] = (path, False)
    for _, (script, group) in sorted(scripts.items()):
        if group:  # an init signals the script's whole process group: the service hears SIGTERM
            continue
        text = container_files[script] if script in container_files else read(script)
        if text is None or not _is_shell_script(script, text):
            continue
        for problem in shell_problems(text):
            yield Finding(script, problem.line, problem.message)
