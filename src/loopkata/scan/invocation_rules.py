"""LK11: a write sent again without a key made before its first attempt, and a client made per invocation.

A connection can die after the server applied a write and before its answer
came back: the client sees a connection error for a write that was made.
Sending the write again is right only under one Idempotency-Key made before
the first attempt, which the server answers from; without one, or with a new
one per attempt, the server applies it twice. A write is `x.post(...)`,
`x.patch(...)` or `x.request("POST", ...)`; a GET, PUT or DELETE is
idempotent by its method (aiohttp itself sends a read again on a dead pooled
connection). It is sent again when:

- the same call (same callee, same first argument) is made in the `try` and
  in one of its `except` blocks;
- it is made in a `try` inside a loop that the `try` ends on success (a
  `return` or `break`): `for attempt in range(3)`, `while True`. A loop
  without one (a batch: one write per item) sends each write once;
- either of those calls a function of the same module that makes the write
  (one level of helpers), which then carries what its caller hands it.

A write that carries a `headers=` (or anything spelled `idempot...`) is
judged by how it is made: only a key evaluated inside the attempts from a
value made anew each time (uuid, secrets, random, os.urandom) is flagged.
What headers hold is not read: a `headers=` made before the attempts counts
as a key. A retry made by a library (tenacity's `@retry`, `backoff`) is not
read either.

The second part: a Lambda-style `handler(event, context)` that runs a
coroutine with `asyncio.run(...)`, where that coroutine (or one it awaits in
the module) opens a pooled client (`async with aiohttp.ClientSession()`, a
local `httpx.AsyncClient()`): a new event loop, a new session and a new TCP
connection every warm invocation. A client kept in a global is kata 02's and
06's concern, and a loop kept by the module (`LOOP.run_until_complete`) is
left alone.
"""
from __future__ import annotations

import ast

from .python_rules import POOLED_CLIENTS, Names

WRITES = {"post", "patch"}
# a value made anew at every call: a key made from one inside the attempts differs between them
FRESH_MODULES = {"uuid", "secrets", "random", "ulid"}
FRESH_CALLS = {("os", "urandom"), ("time", "time"), ("time", "time_ns")}
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_FUNCTIONS = (*_DEFS, ast.Lambda)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _own_nodes(scope) -> list[ast.AST]:
    """The nodes under `scope` (a function, a statement or a list of them), not inside functions defined there."""
    stack = list(scope.body) if isinstance(scope, _DEFS) else list(scope) if isinstance(scope, list) \
        else [scope]
    found = []
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _is_write(node) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    if node.func.attr in WRITES:
        return True
    return node.func.attr == "request" and bool(node.args) and isinstance(node.args[0], ast.Constant) \
        and str(node.args[0].value).upper() in {"POST", "PATCH"}


def _same_call(a: ast.Call, b: ast.Call) -> bool:
    """The same write sent again: same callee, same first argument (the URL)."""
    return ast.unparse(a.func) == ast.unparse(b.func) and \
        [ast.unparse(x) for x in a.args[:1]] == [ast.unparse(x) for x in b.args[:1]]


def _ends_loop_on_success(attempt: ast.Try) -> bool:
    """Does the `try` leave its loop when the attempt works (a return or break of that loop)?"""
    stack = [*attempt.body, *attempt.orelse]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Return, ast.Break)):
            return True
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, (*_FUNCTIONS, *_LOOPS))]
    return False


class _Module:
    """One module's functions, for the writes its helpers make."""

    def __init__(self, names: Names):
        self.names = names
        self.functions = {f.name: f for f in names.functions}
        self.writes: dict[str, list[ast.Call]] = {}  # filled as helpers are asked about

    def helper(self, call: ast.Call):
        """The module's own function that `call` runs (`f(...)`, `self.f(...)`), when it makes a write."""
        func = call.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) and getattr(func.value, "id", None) in ("self", "cls") else None
        if name not in self.functions:
            return None
        if name not in self.writes:
            self.writes[name] = [n for n in _own_nodes(self.functions[name]) if _is_write(n)]
        return self.functions[name] if self.writes[name] else None

    def fresh(self, expr, region: list[ast.AST], seen: frozenset = frozenset()) -> bool:
        """Is `expr`, evaluated inside `region`, made anew each time: a fresh value's call, or a name the
        region assigns from one?"""
        for node in ast.walk(expr):
            if isinstance(node, ast.Call):
                made = self.names.resolve(node.func)
                if made and (made[0].split(".")[0] in FRESH_MODULES or made in FRESH_CALLS):
                    return True
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in seen:
                for assign in region:
                    if isinstance(assign, (ast.Assign, ast.AnnAssign)) and assign.value is not None and any(
                            isinstance(t, ast.Name) and t.id == node.id
                            for t in (assign.targets if isinstance(assign, ast.Assign) else [assign.target])) \
                            and self.fresh(assign.value, region, seen | {node.id}):
                        return True
        return False


def _key(call: ast.Call) -> list[ast.expr] | None:
    """What carries the write's key: its `headers=`, or every argument when one spells `idempot...`;
    None when it carries none. A `**kwargs` may carry one: an empty list, judged clean."""
    if any(k.arg is None for k in call.keywords):
        return []
    headers = [k.value for k in call.keywords if k.arg == "headers"]
    if headers:
        return headers
    if "idempot" in ast.unparse(call).lower():
        return [*call.args, *(k.value for k in call.keywords)]
    return None


def _argument(call: ast.Call, function, parameter: str) -> ast.expr | None:
    """The expression `call` hands to `function`'s `parameter`, if any."""
    params = [a.arg for a in function.args.posonlyargs + function.args.args]
    if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
        params = params[1:]
    for keyword in call.keywords:
        if keyword.arg == parameter:
            return keyword.value
    if parameter in params and params.index(parameter) < len(call.args):
        return call.args[params.index(parameter)]
    return None


def _unkeyed(module: _Module, call: ast.Call, region: list[ast.AST]) -> str | None:
    """Why `call`, sent again within `region`, has no key kept across its attempts (None when it has one)."""
    helper = module.helper(call)
    if helper is None:
        carried = _key(call)
        if carried is None:
            return "without an Idempotency-Key"
        return "with a key made anew for each attempt" if any(module.fresh(c, region) for c in carried) else None
    params = {a.arg for a in helper.args.posonlyargs + helper.args.args + helper.args.kwonlyargs}
    inside = _own_nodes(helper)
    for write in module.writes[helper.name]:
        carried = _key(write)
        if carried is None:
            return f"through {helper.name}(), whose write carries no Idempotency-Key"
        for value in carried:
            if isinstance(value, ast.Name) and value.id in params:
                handed = _argument(call, helper, value.id)
                if handed is None:
                    return f"through {helper.name}(), which is handed no `{value.id}`"
                if module.fresh(handed, region):
                    return "with a key made anew for each attempt"
            elif module.fresh(value, inside):
                return f"through {helper.name}(), which makes a new key for each attempt"
    return None


def _retried(module: _Module, function):
    """(call, region) for each write (or helper that makes one) that `function` sends again."""
    parents = module.names.parents
    for attempt in (n for n in _own_nodes(function) if isinstance(n, ast.Try)):
        tried = [n for n in _own_nodes(attempt.body) if isinstance(n, ast.Call)
                 and (_is_write(n) or module.helper(n))]
        for handler in attempt.handlers:
            for again in (n for n in _own_nodes(handler.body) if isinstance(n, ast.Call)
                          and (_is_write(n) or module.helper(n))):
                if any(_same_call(again, first) for first in tried):
                    yield again, _own_nodes(attempt)
        loop = parents.get(attempt)
        while loop is not None and not isinstance(loop, (*_LOOPS, *_FUNCTIONS)):
            loop = parents.get(loop)
        if isinstance(loop, _LOOPS) and _ends_loop_on_success(attempt):
            for call in tried:
                yield call, _own_nodes(loop.body)


def _enclosing(node, names: Names):
    while node is not None and not isinstance(node, _DEFS):
        node = names.parents.get(node)
    return node


def _writes_sent_again(names: Names):
    module = _Module(names)
    trying = {_enclosing(n, names) for n in names.nodes if isinstance(n, ast.Try)}
    for function in (f for f in names.functions if f in trying):
        seen = set()
        for call, region in _retried(module, function):
            why = _unkeyed(module, call, region)
            if why and call not in seen:
                seen.add(call)
                yield "LK11", call, (
                    f"this write is sent again after an error {why}: if the first attempt reached the server "
                    "before its connection died, the server applies it twice; make one Idempotency-Key per write, "
                    "before the first attempt, and send it with every attempt")


def _is_lambda_handler(function) -> bool:
    params = [a.arg for a in function.args.args]
    return isinstance(function, ast.FunctionDef) and params[:2] == ["event", "context"]


def _pooled_client(node, names: Names) -> str | None:
    if isinstance(node, ast.Call):
        found = names.resolve(node.func)
        if found and any(found[1] == name and found[0].startswith(module) for module, name in POOLED_CLIENTS):
            return found[1]
    return None


def _clients_per_invocation(names: Names):
    coroutines = {f.name: f for f in names.tree.body if isinstance(f, ast.AsyncFunctionDef)}
    for handler in (f for f in names.tree.body if isinstance(f, ast.FunctionDef) and _is_lambda_handler(f)):
        todo = [c.args[0].func.id for c in _own_nodes(handler)
                if names.is_call_to(c, "asyncio", {"run"}) and c.args and isinstance(c.args[0], ast.Call)
                and isinstance(c.args[0].func, ast.Name) and c.args[0].func.id in coroutines]
        reached = set()
        while todo:
            name = todo.pop()
            if name in reached:
                continue
            reached.add(name)
            coroutine = coroutines[name]
            declared = {n for node in _own_nodes(coroutine) if isinstance(node, ast.Global) for n in node.names}
            for node in _own_nodes(coroutine):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in coroutines:
                    todo.append(node.func.id)
                made = None
                if isinstance(node, ast.AsyncWith):
                    made = next((i.context_expr for i in node.items if _pooled_client(i.context_expr, names)), None)
                elif isinstance(node, ast.Assign) and _pooled_client(node.value, names) and all(
                        isinstance(t, ast.Name) and t.id not in declared for t in node.targets):
                    made = node.value
                if made is not None:
                    yield "LK11", made, (
                        f"{handler.name}() runs each invocation with asyncio.run(), and {name}() opens a "
                        f"{_pooled_client(made, names)} in it: a new event loop, a new session and a new TCP "
                        "connection (a handshake, and TLS) every warm invocation; keep one loop for the container "
                        "(a module-level loop and run_until_complete) and one client made on it")


def check(names: Names):
    """LK11's findings in one module."""
    if names.identifiers & (WRITES | {"request"}) and any(isinstance(n, ast.Try) for n in names.nodes):
        yield from _writes_sent_again(names)
    if "context" in names.identifiers and "run" in names.identifiers:
        yield from _clients_per_invocation(names)
