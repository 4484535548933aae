"""LK13: an event-loop watchdog that runs on the loop it watches, and one that ends only its own thread.

Part A: an `async def` started as a task in its module (`create_task`,
`ensure_future`) that loops on `await asyncio.sleep(...)`, measures how late
the sleep came back (a clock read before and after: `time.monotonic()`,
`perf_counter()`, `loop.time()`) and, past a limit, treats it as a failure
(logs at ERROR or above, exits, kills, raises). While the loop is frozen the
task does not run either: it can only notice a freeze once it is over. A task
that reports lag at WARNING or below is a measurement, which it can make, and
is left alone.

Part B: `sys.exit(status)` or `raise SystemExit(status)` with a status other
than 0 in a function run by `threading.Thread(target=...)`: SystemExit ends
that thread only, and the process goes on. A bare `sys.exit()` that ends a
worker thread on purpose is left alone.
"""
from __future__ import annotations

import ast

from .python_rules import Names

CLOCKS = {("time", n) for n in ("monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns")}
FAILURE_LEVELS = {"error", "critical", "exception", "fatal"}
ENDINGS = {("os", "_exit"), ("sys", "exit"), ("os", "kill"), ("os", "abort"), ("signal", "raise_signal"),
           ("os", "killpg")}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(statements: list[ast.stmt]) -> list[ast.AST]:
    found, stack = [], list(statements)
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _is_clock(node, names: Names) -> bool:
    if not isinstance(node, ast.Call):
        return False
    if names.resolve(node.func) in CLOCKS:
        return True
    # loop.time(), asyncio.get_running_loop().time()
    func = node.func
    return isinstance(func, ast.Attribute) and func.attr == "time" and (
        (isinstance(func.value, ast.Name) and "loop" in func.value.id)
        or (isinstance(func.value, ast.Call) and getattr(func.value.func, "attr", "") in
            ("get_running_loop", "get_event_loop")))


class _Values:
    """What a function assigns to each of its names, to follow `held = time.monotonic() - before`."""

    def __init__(self, function, names: Names):
        self.names = names
        self.assigned: dict[str, list[ast.expr]] = {}
        for node in _own_nodes(function.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigned.setdefault(target.id, []).append(node.value)

    def reads_clock(self, expr, seen: frozenset = frozenset()) -> bool:
        for node in ast.walk(expr):
            if _is_clock(node, self.names):
                return True
            if isinstance(node, ast.Name) and node.id not in seen and any(
                    self.reads_clock(v, seen | {node.id}) for v in self.assigned.get(node.id, [])):
                return True
        return False

    def measures_lag(self, expr, seen: frozenset = frozenset()) -> bool:
        """A difference of clock readings, in `expr` or in what its names were assigned."""
        for node in ast.walk(expr):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and self.reads_clock(node):
                return True
            if isinstance(node, ast.Name) and node.id not in seen and any(
                    self.measures_lag(v, seen | {node.id}) for v in self.assigned.get(node.id, [])):
                return True
        return False


def _fails(statements: list[ast.stmt], names: Names) -> bool:
    """Do these statements treat what they saw as a failure: log it at ERROR or above, end the process, raise?"""
    for node in _own_nodes(statements):
        if isinstance(node, ast.Raise):
            return True
        if not isinstance(node, ast.Call):
            continue
        if names.resolve(node.func) in ENDINGS:
            return True
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in FAILURE_LEVELS:
            receiver = func.value
            spelled = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
            if "log" in spelled.lower():
                return True
    return False


def _started_as_tasks(names: Names) -> set[str]:
    """Names of the functions (`f`, or a method run as `self.f`) whose coroutine the module wraps in a task."""
    started = set()
    for call in names.nodes:
        if isinstance(call, ast.Call) and getattr(call.func, "attr", getattr(call.func, "id", None)) in \
                ("create_task", "ensure_future") and call.args and isinstance(call.args[0], ast.Call):
            func = call.args[0].func
            if isinstance(func, ast.Name):
                started.add(func.id)
            elif isinstance(func, ast.Attribute) and getattr(func.value, "id", None) in ("self", "cls"):
                started.add(func.attr)
    return started


def _watchdogs_on_their_loop(names: Names):
    started = _started_as_tasks(names)
    for function in (f for f in names.functions if isinstance(f, ast.AsyncFunctionDef) and f.name in started):
        values = None
        for loop in (n for n in _own_nodes(function.body) if isinstance(n, ast.While)):
            inside = _own_nodes(loop.body)
            sleeps = [n for n in inside if isinstance(n, ast.Await) and names.is_call_to(n.value, "asyncio", {"sleep"})]
            if not sleeps:
                continue
            values = values or _Values(function, names)
            if any(isinstance(n, ast.If) and values.measures_lag(n.test) and _fails(n.body, names) for n in inside):
                yield "LK13", min(sleeps, key=lambda n: (n.lineno, n.col_offset)), (
                    f"{function.name}() watches the event loop from a task on that same loop: while the loop is "
                    "frozen the task does not run, so it can only notice a freeze after it has ended; watch from a "
                    "thread (a heartbeat the loop stamps, read by a daemon thread that ends the process with "
                    "os._exit())")


def _status(call_or_raise) -> ast.expr | None:
    """The status a sys.exit(...) or raise SystemExit(...) ends with, when it is not 0."""
    args = call_or_raise.args if isinstance(call_or_raise, ast.Call) else []
    if not args:
        return None
    if isinstance(args[0], ast.Constant) and args[0].value in (0, None, False):
        return None
    return args[0]


def _thread_targets(names: Names) -> list:
    """The module's functions run by `threading.Thread(target=f)` or `target=self.f`."""
    targets = set()
    for call in names.nodes:
        if isinstance(call, ast.Call) and names.is_call_to(call, "threading", {"Thread"}):
            for keyword in call.keywords:
                if keyword.arg == "target":
                    value = keyword.value
                    if isinstance(value, ast.Name):
                        targets.add(value.id)
                    elif isinstance(value, ast.Attribute) and getattr(value.value, "id", None) in ("self", "cls"):
                        targets.add(value.attr)
    return [f for f in names.functions if isinstance(f, ast.FunctionDef) and f.name in targets]


def _exits_in_threads(names: Names):
    for function in _thread_targets(names):
        for node in _own_nodes(function.body):
            ending = None
            if isinstance(node, ast.Call) and names.is_call_to(node, "sys", {"exit"}):
                ending = node
            elif isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) \
                    and getattr(node.exc.func, "id", None) == "SystemExit":
                ending = node.exc
            if ending is not None and _status(ending) is not None:
                yield "LK13", node, (
                    f"{function.name}() runs on a thread (threading.Thread(target=...)), and SystemExit there ends "
                    "that thread only: the process goes on, with its frozen event loop; end the process with "
                    "os._exit()")


def check(names: Names):
    """LK13's findings in one module."""
    if "sleep" in names.identifiers and names.identifiers & {"create_task", "ensure_future"}:
        yield from _watchdogs_on_their_loop(names)
    if "Thread" in names.identifiers and names.identifiers & {"exit", "SystemExit"}:
        yield from _exits_in_threads(names)
