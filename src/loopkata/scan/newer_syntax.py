"""Modules written in a newer Python's syntax than the one running the scan (`def f[T]`,
`type X = ...` on 3.11), parsed by the newest Python on the machine.

The scan runs on the team's interpreter, which may be older than their code. A module
the running Python cannot parse is handed to the newest interpreter found (on PATH as
python3.N, or under pyenv), which returns its syntax tree as JSON; the tree is rebuilt
here with this Python's node classes, line numbers kept. What this Python has no class
for is dropped (type parameters) or rewritten (`type X = ...` becomes `X = ...`), since
the rules read neither. No interpreter runs the team's code: only `ast.parse`.
"""
from __future__ import annotations

import ast
import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

TIMEOUT = 120  # seconds for one batch of modules; parsing is milliseconds per module
POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")
REBUILD_DEPTH = 10_000  # frames: a tree about 2,000 levels deep, as deep as the rules themselves can walk

# Runs in the newer interpreter: every module's tree as JSON, or why it did not parse.
DUMP = r"""
import ast, json, sys
def dump(node):
    if isinstance(node, ast.AST):
        out = {"_": type(node).__name__, "_expr": isinstance(node, ast.expr)}
        for name in node._fields:
            out[name] = dump(getattr(node, name, None))
        for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
            if hasattr(node, name):
                out[name] = getattr(node, name)
        return out
    if isinstance(node, list):
        return [dump(item) for item in node]
    if isinstance(node, bytes):
        return {"_bytes": node.decode("latin-1")}
    if isinstance(node, complex):
        return {"_complex": [node.real, node.imag]}
    if node is Ellipsis:
        return {"_ellipsis": True}
    return node
found = {}
for path, text in json.load(sys.stdin).items():
    try:
        found[path] = dump(ast.parse(text, filename=path))
    except SyntaxError as exc:
        found[path] = {"_error": exc.msg, "_line": exc.lineno}
    except (ValueError, RecursionError, MemoryError) as exc:
        found[path] = {"_error": type(exc).__name__, "_line": None}
json.dump(found, sys.stdout)
"""


def _version(executable: str) -> tuple[int, int] | None:
    match = re.search(r"(\d+)\.(\d+)", Path(executable).name) or re.search(r"/(\d+)\.(\d+)[^/]*/bin/", executable)
    return (int(match.group(1)), int(match.group(2))) if match else None


@functools.lru_cache(maxsize=1)
def newest_python() -> tuple[str, tuple[int, int]] | None:
    """(path, version) of the newest Python 3 on this machine newer than the running one, if any."""
    found = {}
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    if pyenv.is_dir():  # pyenv's own interpreters: its shims on PATH run only the version selected
        for folder in sorted(pyenv.iterdir()):
            python = folder / "bin" / "python"
            version = _version(str(python))
            if version and re.fullmatch(r"\d+\.\d+\.\d+", folder.name) and python.exists():
                found[version] = str(python)
    for minor in range(sys.version_info.minor + 1, 30):
        path = shutil.which(f"python3.{minor}")
        if path and "/shims/" not in path:
            found.setdefault((3, minor), path)
    newer = [v for v in found if v > sys.version_info[:2]]
    return (found[max(newer)], max(newer)) if newer else None


def _rebuild(data):
    """This Python's node for a node of the newer one (None for what the rules never read)."""
    if isinstance(data, list):
        return [n for n in (_rebuild(item) for item in data) if n is not None]
    if not isinstance(data, dict):
        return data
    if "_bytes" in data:
        return data["_bytes"].encode("latin-1")
    if "_complex" in data:
        return complex(*data["_complex"])
    if "_ellipsis" in data:
        return ...
    kind = data["_"]
    if kind == "TypeAlias":  # type X[T] = ...: an assignment to X, as far as the rules care
        node = ast.Assign(targets=[_rebuild(data["name"])], value=_rebuild(data["value"]))
    elif isinstance(getattr(ast, kind, None), type) and issubclass(getattr(ast, kind), ast.AST):
        cls = getattr(ast, kind)
        node = cls(**{name: _rebuild(data[name]) if name in data else None for name in cls._fields})
        for name in cls._fields:  # a field this Python has and the newer one does not
            if getattr(node, name, None) is None and name in ("body", "orelse", "finalbody", "handlers",
                                                              "decorator_list", "keywords", "args", "elts"):
                setattr(node, name, [])
    elif data.get("_expr"):  # an expression this Python has no class for: a placeholder
        node = ast.Constant(value=None)
    else:
        return None  # a type parameter and the like: read by no rule
    for name in POSITIONS:
        if name in data:
            setattr(node, name, data[name])
    return node


def _rebuilt(data: dict) -> ast.Module:
    """The module's tree, rebuilt with room for the nesting Python itself parses: each level of the
    tree costs _rebuild a few frames. (Python frames do not use the C stack since 3.11.)"""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, REBUILD_DEPTH))
    try:
        return _rebuild(data)
    finally:
        sys.setrecursionlimit(limit)


def _dump(python: str, texts: dict[Path, str]) -> dict | None:
    """What the newer Python says of each module (its tree as JSON, or why not); None if it failed."""
    try:
        out = subprocess.run([python, "-I", "-c", DUMP], input=json.dumps({str(p): t for p, t in texts.items()}),
                             capture_output=True, text=True, timeout=TIMEOUT)
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError, RecursionError):
        return None


def parse(texts: dict[Path, str]) -> tuple[dict[Path, ast.Module], dict[Path, str]]:
    """Modules the running Python could not parse: those the newest Python reads, as trees of
    this Python's nodes, and for the others why not (the newer Python's own words)."""
    found = newest_python()
    if not texts:
        return {}, {}
    if found is None:
        return {}, {path: "no newer Python was found to try it with" for path in texts}
    python, version = found
    tried = f"Python {version[0]}.{version[1]}"
    dumped = _dump(python, texts)
    if dumped is None and len(texts) > 1:  # one module that stops the newer Python costs only that module
        dumped = {}
        for path, text in texts.items():
            dumped.update(_dump(python, {path: text}) or {})
    if not dumped:
        return {}, {path: f"{tried} at {python} could not be run to try it" for path in texts}
    modules, problems = {}, {}
    for path in texts:
        data = dumped.get(str(path))
        if data is None:
            problems[path] = f"{tried} at {python} stopped before it could say"
            continue
        if not isinstance(data, dict) or "_error" in data:
            why = data.get("_error") if isinstance(data, dict) else "no answer"
            line = f" at line {data['_line']}" if isinstance(data, dict) and data.get("_line") else ""
            problems[path] = f"{tried}, the newest here, cannot parse it either ({why}{line})"
            continue
        try:
            modules[path] = _rebuilt(data)
        except (RecursionError, MemoryError, TypeError, KeyError) as exc:
            problems[path] = f"its tree from {tried} could not be rebuilt ({exc.__class__.__name__})"
    return modules, problems
