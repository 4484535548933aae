"""LK16: a memory budget taken from the host, and an unbounded queue that a feed fills.

A container's memory limit lives in its cgroup (memory.max on cgroup v2,
memory.limit_in_bytes on v1). Past it, the kernel's OOM killer ends the
process with SIGKILL: no `finally`, no checkpoint, exit status 137.

Part A: the host's memory read for a budget: `psutil.virtual_memory()`
(its total, available, free or percent), `os.sysconf("SC_PHYS_PAGES")` (or
SC_AVPHYS_PAGES), and MemTotal / MemAvailable / MemFree of /proc/meminfo.
A container sees the host's numbers in all of them. Left alone: a read that
is only shown (in a log call, `print`, an f-string), one in a function that
also reads the cgroup's limit (its text names memory.max,
memory.limit_in_bytes or a cgroup, or it calls such a function of the module),
and a function of the module whose result every caller in it hands to such
a function.

Part B: an `asyncio.Queue()` with no bound (no maxsize, or maxsize=0) that a
producer fills, item by item, from a feed it does not control (an `async for`,
a loop that awaits a stream's or socket's read, or a protocol's
`data_received`), while a consumer drains it (`get()`). When the feed runs
faster than the consumer, the queue holds everything read: memory grows with
every item until the OOM killer ends the process. The queue is followed from
where it is made to where it is filled and drained: a local, `self.<name>`
in the class, a global, or a parameter of a function of the module that is
called with it.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .python_rules import Names

LIMIT_TEXT = re.compile(r"memory\.max|memory\.high|memory\.limit_in_bytes|cgroup", re.IGNORECASE)
HOST_FIELDS = {"total", "available", "free", "percent"}
PAGES = {"SC_PHYS_PAGES", "SC_AVPHYS_PAGES"}
MEMINFO = re.compile(r"\b(MemTotal|MemAvailable|MemFree)\b")
SHOWN = {"debug", "info", "warning", "warn", "error", "critical", "exception", "log", "print", "format", "echo",
         "write", "set_description", "gauge", "observe", "set"}
# words of a name that holds a budget: what a size, a bound or a guard is made from
BUDGET_WORDS = {"limit", "limits", "budget", "max", "maximum", "maxsize", "cap", "capacity", "bound", "bounds",
                "threshold", "quota", "allowed", "allowance", "headroom", "size", "batch", "cache", "workers",
                "worker", "pool", "queue", "chunk", "buffer", "watermark", "shed", "reserve", "spare"}
QUEUES = {"Queue", "LifoQueue", "PriorityQueue"}
READS = {"read", "readline", "readexactly", "readuntil", "readany", "recv", "recvfrom", "sock_recv", "receive",
         "receive_bytes", "receive_text", "receive_json", "receive_str", "receive_message", "iter_any", "anext",
         "__anext__", "getmessage", "get_message", "fetch"}
CALLBACKS = {"data_received", "datagram_received", "message_received", "on_message", "on_data"}
PUTS = {"put", "put_nowait"}
GETS = {"get", "get_nowait"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own(statements) -> list[ast.AST]:
    found, stack = [], [s for s in statements if not isinstance(s, _FUNCTIONS)]
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _name_of(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


class _Scopes:
    """The module and each function, with the nodes that are their own."""

    def __init__(self, names: Names):
        self.names = names
        self.nodes_of: dict[ast.AST, list[ast.AST]] = {names.tree: _own(names.tree.body)}
        for function in names.functions:
            self.nodes_of[function] = _own(function.body)
        self.scope_of: dict[ast.AST, ast.AST] = {}
        for scope, nodes in self.nodes_of.items():
            for node in nodes:
                self.scope_of.setdefault(node, scope)
        self.class_of: dict[ast.AST, ast.ClassDef] = {}
        for cls in names.classes:
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.class_of[item] = cls


# --- part A: the host's memory -----------------------------------------------------------


def _host_reads(names: Names) -> Iterator[tuple[ast.AST, str]]:
    """(node, what it reads) for every read of the host's memory in the module."""
    meminfo = any(isinstance(n, ast.Constant) and isinstance(n.value, str) and "meminfo" in n.value
                  for n in names.nodes)
    for node in names.nodes:
        if isinstance(node, ast.Call):
            called = names.resolve(node.func)
            if called == ("psutil", "virtual_memory"):
                parent = names.parents.get(node)
                field = parent.attr if isinstance(parent, ast.Attribute) else None
                if field is None or field in HOST_FIELDS:
                    yield node, f"psutil.virtual_memory(){'.' + field if field else ''}"
            elif called == ("os", "sysconf") and node.args and isinstance(node.args[0], ast.Constant) \
                    and node.args[0].value in PAGES:
                yield node, f'os.sysconf("{node.args[0].value}")'
        elif meminfo and isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and (found := MEMINFO.search(node.value)) and not isinstance(names.parents.get(node), ast.Expr):
            yield node, f"/proc/meminfo's {found.group(1)}"


def _shown_only(names: Names, node: ast.AST) -> bool:
    """Is the value only shown: inside a log call, print, an f-string or a %-format?"""
    while node in names.parents:
        parent = names.parents[node]
        if isinstance(parent, (ast.JoinedStr, ast.FormattedValue)):
            return True
        if isinstance(parent, ast.Call) and node is not parent.func and _name_of(parent.func) in SHOWN:
            return True
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Mod) and isinstance(parent.left, ast.Constant) \
                and isinstance(parent.left.value, str):
            return True
        if isinstance(parent, ast.stmt):
            return False
        node = parent
    return False


def _words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return {w for w in spaced.split("_") if w}


def _statement(names: Names, node: ast.AST) -> tuple[ast.AST, list[ast.AST]]:
    """The statement `node` is in, and the nodes on the way up to it."""
    path = [node]
    while node in names.parents and not isinstance(node, ast.stmt):
        node = names.parents[node]
        path.append(node)
    return node, path


def _budget(names: Names, scopes: _Scopes, node: ast.AST, depth: int = 0) -> bool:
    """Is the value of `node` made into a budget: compared (a guard), or held by a name, a keyword or a
    function's result whose name says limit, bound, size, threshold...? Followed through one plain name."""
    statement, path = _statement(names, node)
    if any(isinstance(p, ast.Compare) for p in path):
        return True
    if isinstance(statement, (ast.If, ast.While)) and statement.test in path:
        # `if line.startswith("MemTotal:"): return int(line.split()[1]) * 1024`: judge what the branch makes
        return any(_budget(names, scopes, inner.value, depth) for inner in statement.body
                   if isinstance(inner, (ast.Return, ast.Assign, ast.AnnAssign)) and inner.value is not None)
    for p in path:
        if isinstance(p, ast.keyword) and p.arg and _words(p.arg) & BUDGET_WORDS:
            return True
    if isinstance(statement, ast.Return):  # the function's result: judged by its name, and by what its callers make
        scope = scopes.scope_of.get(statement)
        if not isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        return bool(_words(scope.name) & BUDGET_WORDS) or depth < 2 and any(
            not _shown_only(names, call) and _budget(names, scopes, call, depth + 1) for call in _callers(scopes, scope))
    targets = statement.targets if isinstance(statement, ast.Assign) else \
        [statement.target] if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) else []
    for target in targets:
        spelled = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
        if _words(spelled) & BUDGET_WORDS:
            return True
        if isinstance(target, ast.Name) and depth < 2:
            scope = scopes.scope_of.get(statement)
            uses = [n for n in scopes.nodes_of.get(scope, []) if isinstance(n, ast.Name) and n.id == target.id
                    and isinstance(n.ctx, ast.Load)]
            if any(not _shown_only(names, u) and _budget(names, scopes, u, depth + 1) for u in uses):
                return True
    return False


def _limit_aware(scopes: _Scopes) -> set[ast.AST]:
    aware = set()
    for scope, nodes in scopes.nodes_of.items():
        docstrings = {id(n.value) for n in nodes if isinstance(n, ast.Expr)}
        if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
               and LIMIT_TEXT.search(n.value) for n in nodes):
            aware.add(scope)
    calls = {scope: {_name_of(n.func) for n in nodes if isinstance(n, ast.Call)}
             for scope, nodes in scopes.nodes_of.items()}
    changed = True
    while changed:
        changed = False
        aware_names = {f.name for f in aware if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for scope in scopes.nodes_of:
            if scope not in aware and calls[scope] & aware_names:
                aware.add(scope)
                changed = True
    return aware


def _callers(scopes: _Scopes, function) -> list[ast.Call]:
    return [n for n in scopes.names.nodes if isinstance(n, ast.Call) and _name_of(n.func) == function.name
            and (isinstance(n.func, ast.Name) or getattr(n.func.value, "id", None) in ("self", "cls"))]


def _returned(names: Names, node: ast.AST) -> bool:
    while node in names.parents and not isinstance(node, ast.stmt):
        node = names.parents[node]
    return isinstance(node, ast.Return)


def _host_memory(names: Names, scopes: _Scopes):
    aware = _limit_aware(scopes)
    for node, what in _host_reads(names):
        scope = scopes.scope_of.get(node)
        if scope is None or scope in aware or _shown_only(names, node) or not _budget(names, scopes, node):
            continue
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and _returned(names, node):
            callers = _callers(scopes, scope)
            if callers and all(scopes.scope_of.get(c) in aware or _shown_only(names, c) for c in callers):
                continue  # every caller weighs it against the cgroup's limit, or only shows it
        percent = what.endswith(".percent")
        yield "LK16", node, (
            f"{what} reads the host's memory, not the container's: a cgroup's memory limit (memory.max, "
            "memory.limit_in_bytes) is not in it, so "
            + ("a share of the host's memory says nothing of how near the container is to its limit"
               if percent else "a budget made from it is the host's, many times the container's limit")
            + ", and the kernel's OOM killer ends the process with SIGKILL long before that budget is reached; read the "
            "cgroup's limit and usage, and size from them")


# --- part B: unbounded queues that a feed fills ------------------------------------------


def _unbounded(names: Names, node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    found = names.resolve(node.func)
    if found is None or found[1] not in QUEUES or found[0] not in ("asyncio", "asyncio.queues"):
        return False
    size = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "maxsize"), None)
    if any(k.arg is None for k in node.keywords):
        return False
    return size is None or (isinstance(size, ast.Constant) and isinstance(size.value, int) and size.value <= 0)


def _handle(scopes: _Scopes, scope, expr) -> tuple | None:
    """How a queue is reached from `scope`: ("local", scope, name), ("self", class, attr), ("global", name)."""
    if isinstance(expr, ast.Name):
        function_assigns = scope is not scopes.names.tree and (
            any(isinstance(n, (ast.Name,)) and n.id == expr.id and isinstance(n.ctx, ast.Store)
                for n in scopes.nodes_of.get(scope, []))
            or any(a.arg == expr.id for a in _arguments(scope)))
        return ("local", scope, expr.id) if function_assigns else ("global", expr.id)
    if isinstance(expr, ast.Attribute) and getattr(expr.value, "id", None) == "self" and scope in scopes.class_of:
        return ("self", scopes.class_of[scope], expr.attr)
    return None


def _arguments(function) -> list[ast.arg]:
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []
    a = function.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs]


def _passed_on(scopes: _Scopes, handles: set) -> set:
    """The parameters of the module's functions that calls hand one of `handles` to."""
    found = set()
    functions = {f.name: f for f in scopes.names.functions}
    for call in scopes.names.nodes:
        if not isinstance(call, ast.Call):
            continue
        function = functions.get(_name_of(call.func))
        if function is None:
            continue
        scope = scopes.scope_of.get(call)
        params = [p.arg for p in [*function.args.posonlyargs, *function.args.args]]
        if params[:1] in (["self"], ["cls"]) and isinstance(call.func, ast.Attribute):
            params = params[1:]
        pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        for param, value in pairs:
            if _handle(scopes, scope, value) in handles:
                found.add(("local", function, param))
    return found


def _feed(scopes: _Scopes, call: ast.Call) -> str | None:
    """What feeds the put `call` makes, when it runs once per item of a feed the code does not control."""
    names = scopes.names
    node = call
    scope = scopes.scope_of.get(call)
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and scope.name in CALLBACKS:
        return f"{scope.name}(), once per chunk that arrives"
    while node in names.parents and node is not scope:
        parent = names.parents[node]
        if isinstance(parent, ast.AsyncFor) and node is not parent.iter:
            return f"`async for` over {ast.unparse(parent.iter)[:40]}"
        if isinstance(parent, (ast.While, ast.For)) and node is not getattr(parent, "iter", None):
            for inner in _own(parent.body):
                if isinstance(inner, ast.Await) and isinstance(inner.value, ast.Call) \
                        and _name_of(inner.value.func) in READS:
                    return f"`{ast.unparse(inner.value)[:40]}` in a loop"
            return None
        node = parent
    return None


def _queues(names: Names, scopes: _Scopes):
    for node in names.nodes:
        if not _unbounded(names, node):
            continue
        parent = names.parents.get(node)
        scope = scopes.scope_of.get(node)
        targets = parent.targets if isinstance(parent, ast.Assign) else \
            [parent.target] if isinstance(parent, ast.AnnAssign) else []
        handles = {h for t in targets if (h := _handle(scopes, scope, t)) is not None}
        if not handles and isinstance(scope, ast.Module):
            continue
        if not handles:
            continue
        for _ in range(3):  # handed on through up to three calls
            handles |= _passed_on(scopes, handles)
        fed, drained = None, False
        for call in names.nodes:
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                    and call.func.attr in PUTS | GETS):
                continue
            if _handle(scopes, scopes.scope_of.get(call), call.func.value) not in handles:
                continue
            if call.func.attr in GETS:
                drained = True
            elif fed is None and (how := _feed(scopes, call)):
                fed = (call, how)
        if fed and drained:
            put, how = fed
            producer = scopes.scope_of.get(put)
            who = f"{producer.name}()" if isinstance(producer, (ast.FunctionDef, ast.AsyncFunctionDef)) else "the module"
            yield "LK16", node, (
                f"{ast.unparse(node.func)}() has no bound, and {who} fills it from {how} (line {put.lineno}), "
                "a feed it does not control, while a consumer drains it: when the feed runs faster, the queue keeps "
                "everything read, memory grows with every item, and the kernel's OOM killer ends the process "
                "with SIGKILL at the container's limit (no finally, no checkpoint); give it a maxsize, so that a "
                "full queue makes the producer wait and the feed with it")


def check(names: Names):
    """LK16's findings in one module."""
    identifiers = names.identifiers
    host = bool(identifiers & {"virtual_memory", "sysconf"}) or any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and "meminfo" in n.value for n in names.nodes
    ) if identifiers & {"virtual_memory", "sysconf", "open", "read_text", "Path"} else False
    queues = bool(identifiers & QUEUES) and bool(identifiers & PUTS) and bool(identifiers & GETS)
    if host or queues:
        scopes = _Scopes(names)
        if host:
            yield from _host_memory(names, scopes)
        if queues:
            yield from _queues(names, scopes)
