"""LK12: an event loop started on a thread whose event loop is already running.

A plain `def` that starts a loop (`asyncio.run(...)`, `asyncio.Runner().run(...)`,
`<loop>.run_until_complete(...)`), or that calls one that does, is a loop
starter. Called from an `async def`, it runs on the thread of the loop that
runs that coroutine: asyncio.run() refuses ("cannot be called from a running
event loop"), run_until_complete() on the running loop raises, and a new loop
of its own cannot run on a thread that already runs one. Starters are found
across the package (or folder of modules) a module belongs to, by name, through
its own imports (`from . import jobs`, `jobs.run_async`, `from .jobs import
run_async`). Flagged:

- a call of a starter in an `async def` (not in a `def` or lambda defined there:
  those run where they are handed, a thread maybe);
- a call of a parameter (`task(*args)`) in an `async def` that the module wraps
  in `create_task`/`ensure_future` from a function whose callers, somewhere in
  the package, hand it a starter (`jobs.dispatch(tasks.build_report, ...)`);
- `nest_asyncio.apply()` (or `nest_asyncio2`), which hides the error by running
  the nested loop's work on the running loop, so the work blocks it; not in
  test files, nor in a module that imports IPython (a notebook's own loop).

A `def` that asks for the running loop before it starts one
(`asyncio.get_running_loop()` outside an `except` block, `loop.is_running()`)
chooses where to run, and is not a starter. Handing a starter to a thread
(`asyncio.to_thread(f, ...)`, `run_in_executor`, `Thread(target=f)`) passes a
reference, never a call, so it is never flagged. Not followed: a Celery task's
`delay()` under `task_always_eager = True`, which runs the task in the caller's
thread, the loop's, too.
"""
from __future__ import annotations

import ast
from pathlib import Path

from .python_rules import Names

NEST_ASYNCIO = {"nest_asyncio", "nest_asyncio2"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_TASK_MAKERS = {"create_task", "ensure_future"}
_GUARDS = {"get_running_loop", "_get_running_loop", "is_running"}
_STARTING = {"run", "run_until_complete", "Runner"}  # a module that spells none of these starts no loop


def _own_nodes(function) -> list[ast.AST]:
    """The nodes of a function's body, not inside the functions and lambdas defined there."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _starts_here(call: ast.Call, names: Names) -> str | None:
    """'asyncio.run' when `call` starts an event loop on the calling thread."""
    if names.is_call_to(call, "asyncio", {"run"}):
        return "asyncio.run"
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "run_until_complete":
        return "run_until_complete"
    if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Call) \
            and names.is_call_to(func.value, "asyncio", {"Runner"}):
        return "asyncio.Runner().run"
    return None


def _guarded(function, names: Names) -> bool:
    """Does the def ask whether a loop runs before it starts one (outside an except block)?"""
    handled = {n for h in _own_nodes(function) if isinstance(h, ast.ExceptHandler) for b in h.body
               for n in ast.walk(b)}
    return any(isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))
               and getattr(n.func, "attr", getattr(n.func, "id", None)) in _GUARDS and n not in handled
               for n in _own_nodes(function))


def _module_id(path: Path, root: Path) -> str:
    """'pkg.jobs' for pkg/jobs.py: the dotted name the package's own imports spell it by."""
    parts = list(path.absolute().relative_to(root.absolute().parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


class Starters:
    """The loop starters of every scanned package, and how each module's names reach them."""

    def __init__(self, modules: dict[Path, Names], roots: dict[Path, Path]):
        self.modules = modules
        self.ids: dict[Path, str] = {path: _module_id(path, roots[path]) for path in modules}
        by_id: dict[str, Path] = {}
        for path, spelled in self.ids.items():
            by_id.setdefault(spelled, path)
            if "." in spelled and not (roots[path] / "__init__.py").exists():
                by_id.setdefault(spelled.split(".", 1)[1], path)  # a folder of modules imports them by their own names
        self.imports = {path: self._imports(path, names, by_id) for path, names in modules.items()}
        self.defs = {(path, f.name): f for path, names in modules.items() for f in names.tree.body
                     if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.starters: dict[tuple[Path, str], str] = {}  # (module, def) -> "run_async -> asyncio.run"
        plain = {key: f for key, f in self.defs.items() if isinstance(f, ast.FunctionDef)}
        for (path, name), function in plain.items():
            if modules[path].identifiers & _STARTING:
                nodes = _own_nodes(function)
                started = next((s for n in nodes if isinstance(n, ast.Call) and (s := _starts_here(n, modules[path]))),
                               None) or next(("asyncio.Runner().run" for n in nodes if isinstance(n, ast.With) and any(
                                   modules[path].is_call_to(i.context_expr, "asyncio", {"Runner"}) for i in n.items)),
                                   None)
                if started and not _guarded(function, modules[path]):
                    self.starters[(path, name)] = f"{name} -> {started}"
        # a def reaches a starter only by spelling its name: read the calls of those that spell one
        calls: dict[tuple[Path, str], set] = {}
        changed = bool(self.starters)
        while changed:
            changed = False
            spelled = {name for _, name in self.starters}
            for key, function in plain.items():
                if key in self.starters or not modules[key[0]].identifiers & spelled:
                    continue
                if key not in calls:
                    calls[key] = {c for n in _own_nodes(function) if isinstance(n, ast.Call)
                                  and (c := self.resolve(key[0], n.func))}
                reached = next((c for c in calls[key] if c in self.starters), None)
                if reached and not _guarded(function, modules[key[0]]):
                    self.starters[key] = f"{key[1]} -> {self.starters[reached]}"
                    changed = True

    def _imports(self, path: Path, names: Names, by_id: dict[str, Path]) -> dict[str, tuple[Path, str | None]]:
        """Local name -> (module, None) for a module of the package, (module, name) for one of its defs."""
        package = self.ids[path] if path.name == "__init__.py" else self.ids[path].rpartition(".")[0]
        found = {}
        for node in names.tree.body:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in by_id and (alias.asname or "." not in alias.name):
                        found[alias.asname or alias.name] = (by_id[alias.name], None)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".") if package else []
                    parts = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
                    base = ".".join(p for p in [*parts, node.module or ""] if p)
                for alias in node.names:
                    local = alias.asname or alias.name
                    if f"{base}.{alias.name}".strip(".") in by_id:
                        found[local] = (by_id[f"{base}.{alias.name}".strip(".")], None)
                    elif base in by_id:
                        found[local] = (by_id[base], alias.name)
        return found

    def resolve(self, path: Path, func) -> tuple[Path, str] | None:
        """The package's def that a callee (or a function handed on) spells: `f`, `mod.f`."""
        if isinstance(func, ast.Name):
            if (path, func.id) in self.defs:
                return path, func.id
            module, name = self.imports[path].get(func.id, (None, None))
            return (module, name) if module and name else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            module, name = self.imports[path].get(func.value.id, (None, None))
            if module and name is None:
                return module, func.attr
        return None

    def chain(self, path: Path, func) -> str | None:
        key = self.resolve(path, func)
        return self.starters.get(key) if key else None


def _message(where: str, chain: str) -> str:
    return (f"{where} starts an event loop on the thread of the loop that runs it ({chain}): asyncio.run() "
            "refuses with 'cannot be called from a running event loop', and a second loop cannot run on a thread "
            "that already runs one; run the plain function on a worker thread (await asyncio.to_thread(f, ...)), "
            "or await the coroutine itself")


def _handed_starters(path: Path, names: Names, starters: Starters) -> dict[str, list]:
    """Coroutine function name -> (parameter, index in the dispatcher's parameters, dispatcher) for each
    parameter that a module-level function hands on when it wraps the coroutine in a task."""
    found: dict[str, list] = {}
    if not names.identifiers & _TASK_MAKERS:
        return found
    for dispatcher in (f for f in names.tree.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))):
        outer = [a.arg for a in dispatcher.args.posonlyargs + dispatcher.args.args]
        for call in (n for n in _own_nodes(dispatcher) if isinstance(n, ast.Call)):
            func = call.func
            if not (getattr(func, "attr", getattr(func, "id", None)) in _TASK_MAKERS and call.args
                    and isinstance(call.args[0], ast.Call) and isinstance(call.args[0].func, ast.Name)):
                continue
            wrapped = starters.defs.get((path, call.args[0].func.id))
            if not isinstance(wrapped, ast.AsyncFunctionDef):
                continue
            params = [a.arg for a in wrapped.args.posonlyargs + wrapped.args.args]
            for index, argument in enumerate(call.args[0].args[:len(params)]):
                if isinstance(argument, ast.Name) and argument.id in outer:
                    found.setdefault(wrapped.name, []).append((params[index], outer.index(argument.id), dispatcher))
    return found


def _callers_hand(starters: Starters, target: tuple[Path, str], index: int) -> str | None:
    """The chain of a loop starter that some call of `target` in the package hands as its argument `index`."""
    for path, names in starters.modules.items():
        if target[1] not in names.identifiers:
            continue
        for call in (n for n in names.nodes if isinstance(n, ast.Call)):
            if index < len(call.args) and starters.resolve(path, call.func) == target:
                chain = starters.chain(path, call.args[index])
                if chain:
                    return chain
    return None


def check(path: Path, names: Names, starters: Starters | None):
    """LK12's findings in one module (the starters' only when `starters` knows the package's defs)."""
    if names.identifiers & {"apply"} and not path.name.startswith("test_") and not path.stem.endswith("_test") \
            and path.name != "conftest.py" and not any(m.split(".")[0] in ("IPython", "ipykernel")
                                                         for m in [*names.modules.values(),
                                                                   *(o[0] for o in names.objects.values())]):
        for node in (n for n in names.nodes if isinstance(n, ast.Call)):
            module, name = names.resolve(node.func) or ("", "")
            if module in NEST_ASYNCIO and name == "apply":
                yield "LK12", node, (
                    f"{module}.apply() lets asyncio.run() start inside a running event loop by "
                    "running the nested work on that loop: the error is gone, and the work now blocks the loop "
                    "(every request waits for it); run the plain function on a worker thread instead")
    if starters is None:
        return
    spelled = names.identifiers & (_STARTING | {name for _, name in starters.starters})
    for function in (f for f in names.functions if spelled and isinstance(f, ast.AsyncFunctionDef)):
        for node in (n for n in _own_nodes(function) if isinstance(n, ast.Call)):
            started = _starts_here(node, names)
            chain = started or starters.chain(path, node.func)
            if chain:
                yield "LK12", node, _message(f"{function.name}() is a coroutine, and this call", chain)
    if not starters.starters:
        return
    handed = _handed_starters(path, names, starters)
    for function in (f for f in names.tree.body if isinstance(f, ast.AsyncFunctionDef) and f.name in handed):
        for param, index, dispatcher in handed[function.name]:
            chain = _callers_hand(starters, (path, dispatcher.name), index)
            if not chain:
                continue
            for node in (n for n in _own_nodes(function) if isinstance(n, ast.Call)
                         and isinstance(n.func, ast.Name) and n.func.id == param):
                yield "LK12", node, _message(
                    f"{function.name}() is a coroutine ({dispatcher.name}() wraps it in a task), and "
                    f"`{param}` is {chain.split(' -> ')[0]}, so this call", f"{function.name} -> {param} -> {chain}")
