"""LK08: an `async def` route that calls a synchronous client, and an access line written only
after `await call_next(...)`.

A call blocks when it reaches a known blocking library (requests, httpx.Client, time.sleep,
subprocess...): directly, or through the project's own `def`s, followed across every module
of the scan by name (a class's methods, module-level functions). In an `async def` route it
runs on the event loop, so every other request of the worker waits for it. Calls handed to
a thread (`asyncio.to_thread(client.complete, ...)`, a lambda for `run_in_executor`) are not
calls in the route, so they are not flagged. Syntax only: a receiver's class is known from
an annotation (`model: DraftModel = ...`), a construction (`DraftModel(...)`), or an
`app.state.<name> = DraftModel(...)` anywhere in the project.
"""
from __future__ import annotations

import ast
from collections.abc import Iterable

from .python_rules import Names

# clients whose methods do network or disk I/O on the calling thread: (module, callable)
SYNC_CLIENTS = {("httpx", "Client"), ("requests", "Session"), ("requests", "session"), ("urllib3", "PoolManager"),
                ("smtplib", "SMTP"), ("smtplib", "SMTP_SSL"), ("ftplib", "FTP"), ("psycopg2", "connect"),
                ("psycopg", "connect"), ("pymysql", "connect"), ("sqlite3", "connect"), ("redis", "Redis"),
                ("redis", "StrictRedis"), ("pymongo", "MongoClient"), ("boto3", "client"), ("boto3", "resource"),
                ("openai", "OpenAI"), ("anthropic", "Anthropic")}
# calls that block the calling thread until the network, a child process or the clock is done
BLOCKING_CALLS = {("requests", n) for n in ("get", "post", "put", "patch", "delete", "head", "options", "request")} | \
    {("httpx", n) for n in ("get", "post", "put", "patch", "delete", "head", "options", "request", "stream")} | \
    {("urllib.request", "urlopen"), ("time", "sleep"), ("socket", "create_connection"), ("os", "system")} | \
    {("subprocess", n) for n in ("run", "call", "check_call", "check_output")}
ROUTE_DECORATORS = {"get", "post", "put", "patch", "delete", "head", "options", "trace", "route", "api_route",
                    "websocket"}
LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _own_nodes(function) -> list[ast.AST]:
    """The nodes of a function's body, not those of functions and lambdas defined inside it
    (they run when called, maybe on a thread)."""
    found, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _class_name(annotation) -> str | None:
    """`DraftModel`, `client.DraftModel`, "DraftModel", `DraftModel | None` -> 'DraftModel'."""
    if isinstance(annotation, ast.Name):
        return annotation.id
    if isinstance(annotation, ast.Attribute):
        return annotation.attr
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1].split("|")[0].strip() or None
    if isinstance(annotation, ast.BinOp):
        return _class_name(annotation.left) or _class_name(annotation.right)
    if isinstance(annotation, ast.Subscript) and getattr(annotation.value, "id", None) in ("Optional", "Annotated"):
        inner = annotation.slice.elts[0] if isinstance(annotation.slice, ast.Tuple) else annotation.slice
        return _class_name(inner)
    return None


def _is_state(node) -> str | None:
    """`app.state.model` / `request.app.state.model` -> 'model'."""
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "state":
        return node.attr
    return None


class Blocking:
    """What blocks in the scanned project: its defs that reach a blocking library, by function
    name and by class and method, and the classes kept in an app's `state`."""

    def __init__(self, modules: Iterable[Names]):
        self.functions: dict[str, str] = {}  # name -> what it reaches ("httpx.Client.post")
        self.methods: dict[tuple[str, str], str] = {}  # (class, method) -> what it reaches
        self.classes: set[str] = set()
        self.state: dict[str, str] = {}  # app.state.<name> -> class
        pending = []  # (key, def, class or None, names, client attributes)
        for names in modules:
            for node in names.nodes:
                if isinstance(node, ast.ClassDef):
                    self.classes.add(node.name)
                    clients = self._client_attributes(node, names)
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef):
                            pending.append(((node.name, item.name), item, node.name, names, clients))
                elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for target in node.targets:
                        if _is_state(target) and isinstance(node.value.func, (ast.Name, ast.Attribute)):
                            self.state[_is_state(target)] = _class_name(node.value.func)
            for node in names.tree.body:
                if isinstance(node, ast.FunctionDef):
                    pending.append((node.name, node, None, names, set()))
        # what each def reaches itself, then what it reaches through the others, until nothing changes
        calls = {}
        for key, function, owner, names, clients in pending:
            reached, callees = self._reaches(function, owner, names, clients)
            if reached:
                self._mark(key, reached)
            calls[key] = callees
        changed = True
        while changed:
            changed = False
            for key, callees in calls.items():
                if self._known(key):
                    continue
                for callee in callees:
                    if self._known(callee):
                        self._mark(key, f"{self._spell(callee)}(), which {self._known(callee)}")
                        changed = True
                        break

    def _known(self, key) -> str | None:
        return self.methods.get(key) if isinstance(key, tuple) else self.functions.get(key)

    def _mark(self, key, why: str) -> None:
        (self.methods if isinstance(key, tuple) else self.functions)[key] = why

    @staticmethod
    def _spell(key) -> str:
        return ".".join(key) if isinstance(key, tuple) else key

    @staticmethod
    def _client_attributes(cls: ast.ClassDef, names: Names) -> dict[str, str]:
        """self.<attr> = httpx.Client(...) in any method: attr -> 'httpx.Client'."""
        found = {}
        if not _imports_clients(names):
            return found
        for node in names.walk(cls):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                made = names.resolve(node.value.func)
                if made in SYNC_CLIENTS:
                    for target in node.targets:
                        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                            found[target.attr] = ".".join(made)
        return found

    def _reaches(self, function, owner, names: Names, clients: dict) -> tuple[str | None, set]:
        """(the blocking call this def makes itself, or None; the project defs it calls)."""
        local = sync_clients(function, names)
        callees, reached = set(), None
        for node in _own_nodes(function):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            made = names.resolve(func)
            if made in BLOCKING_CALLS:
                reached = reached or f"calls {'.'.join(made)}()"
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Attribute) \
                    and isinstance(func.value.value, ast.Name) and func.value.value.id == "self" \
                    and func.value.attr in clients:
                reached = reached or f"calls self.{func.value.attr}.{func.attr}() on a {clients[func.value.attr]}"
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in local:
                reached = reached or f"calls {func.value.id}.{func.attr}() on a {local[func.value.id]}"
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                    and owner:
                callees.add((owner, func.attr))
            elif isinstance(func, ast.Name):
                callees.add(func.id)
        return reached, callees

    def blocks(self, call: ast.Call, types: dict[str, str], clients: dict[str, str]) -> str | None:
        """Why `call`, made in an async route, blocks (None when it does not, as far as the syntax shows)."""
        func = call.func
        if isinstance(func, ast.Name) and func.id in self.functions:
            return f"{func.id}() {self.functions[func.id]}"
        if not isinstance(func, ast.Attribute):
            return None
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in clients:
            return f"{receiver.id}.{func.attr}() is a call on a {clients[receiver.id]}, which blocks"
        cls = types.get(receiver.id) if isinstance(receiver, ast.Name) else self.state.get(_is_state(receiver))
        if cls and (cls, func.attr) in self.methods:
            return f"{cls}.{func.attr}() {self.methods[(cls, func.attr)]}"
        return None


def _imports_clients(names: Names) -> bool:
    """Does the module import a library that has a synchronous client?"""
    libraries = {module for module, _ in SYNC_CLIENTS}
    return any(m.split(".")[0] in libraries for m in names.modules.values()) or \
        any(m.split(".")[0] in libraries for m, _ in names.objects.values())


def has_routes(names: Names) -> bool:
    return any(_is_route(f) for f in names.functions)


def sync_clients(scope, names: Names) -> dict[str, str]:
    """Names a scope binds to a synchronous client: `http = httpx.Client()`, `with requests.Session() as s`."""
    found = {}
    if not _imports_clients(names):
        return found
    for node in (names.tree.body if scope is names.tree else _own_nodes(scope)):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and names.resolve(node.value.func) in SYNC_CLIENTS:
            found.update({t.id: ".".join(names.resolve(node.value.func)) for t in node.targets if isinstance(t, ast.Name)})
        elif isinstance(node, ast.With):
            for item in node.items:
                if isinstance(item.context_expr, ast.Call) and names.resolve(item.context_expr.func) in SYNC_CLIENTS \
                        and isinstance(item.optional_vars, ast.Name):
                    found[item.optional_vars.id] = ".".join(names.resolve(item.context_expr.func))
    return found


def _is_route(function) -> bool:
    return isinstance(function, ast.AsyncFunctionDef) and any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ROUTE_DECORATORS
        for d in function.decorator_list)


def _types(function, names: Names, classes: set[str]) -> dict[str, str]:
    """Local names whose class the route spells out: annotated, or constructed, or a module global built at import."""
    found = {}
    module_level = [n for n in names.tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))]
    params = function.args.posonlyargs + function.args.args + function.args.kwonlyargs
    for arg in params:
        if _class_name(arg.annotation) in classes:
            found[arg.arg] = _class_name(arg.annotation)
    for node in module_level + _own_nodes(function):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _class_name(node.annotation) in classes:
            found[node.target.id] = _class_name(node.annotation)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _class_name(node.value.func) in classes:
            found.update({t.id: _class_name(node.value.func) for t in node.targets if isinstance(t, ast.Name)})
    return found


def _is_log_call(node) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name):
        return func.id == "print"
    if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS:
        receiver = func.value
        spelled = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
        return "log" in spelled.lower()
    return False


def _late_access_line(function):
    """The first log call of an HTTP middleware (it takes `call_next`), when every log call
    comes after `await call_next(...)`: the request leaves no line until its handler returns."""
    if not any(a.arg == "call_next" for a in function.args.args):
        return None
    nodes = _own_nodes(function)
    waits = [n for n in nodes if isinstance(n, ast.Await) and isinstance(n.value, ast.Call)
             and getattr(n.value.func, "id", getattr(n.value.func, "attr", None)) == "call_next"]
    handlers = {n for h in nodes if isinstance(h, ast.ExceptHandler) for b in h.body for n in ast.walk(b)}
    # an error report in an except block is not an access line: a middleware with no other is no access log
    logs = sorted((n for n in nodes if _is_log_call(n) and n not in handlers), key=lambda n: (n.lineno, n.col_offset))
    if not waits or not logs:
        return None
    first_wait = min(n.lineno for n in waits)
    return logs[0] if logs[0].lineno > first_wait else None


def check(names: Names, blocking: Blocking | None):
    """LK08's findings in one module (the routes' only when `blocking` knows the project's defs)."""
    clients = sync_clients(names.tree, names) if blocking is not None else {}
    middleware = "call_next" in names.identifiers
    for function in names.functions:
        if middleware and isinstance(function, ast.AsyncFunctionDef):
            late = _late_access_line(function)
            if late is not None:
                yield "LK08", late, (
                    f"{function.name}() writes its access line only after `await call_next(...)` returns: a request "
                    "whose handler hangs, or whose pod is restarted mid-request, leaves no line at all; write an "
                    "arrival line before call_next and the completion line in a finally")
        if blocking is None or not _is_route(function):
            continue
        types = _types(function, names, blocking.classes)
        local = {**clients, **sync_clients(function, names)}
        parents = names.parents
        for node in _own_nodes(function):
            if isinstance(node, ast.Call) and not isinstance(parents.get(node), ast.Await):
                why = blocking.blocks(node, types, local)
                if why:
                    yield "LK08", node, (
                        f"{function.name}() is an async def route, and {why}: it runs on the event loop, so while "
                        "it waits every other request of this worker waits too (the health check included); make "
                        "the route a plain def, or hand the call to a thread (await asyncio.to_thread(...))")
