"""The rules that read Python source: LK01, LK02, LK03, LK04 (what ruff's RUF006 misses), LK05, LK06.

Each rule is a function of one parsed module (LK06 also needs to know whether
the module's package runs event loops) that yields (rule, node, sentence).
They read the syntax only: no import, no type inference, so a name is judged
by how this module spells and assigns it.
"""
from __future__ import annotations

import ast
from collections.abc import Iterator

# asyncio's objects that bind to the first event loop that waits on them
LOOP_BOUND = {"Lock", "Semaphore", "BoundedSemaphore", "Event", "Condition",
              "Queue", "PriorityQueue", "LifoQueue", "Barrier"}
ASYNCIO_SUBMODULES = {"locks", "queues", "mixins"}
LOOP_GETTERS = {"get_running_loop", "get_event_loop", "new_event_loop"}
# clients that pool connections on the loop that opened them: (module, callable)
POOLED_CLIENTS = {("sqlalchemy.ext.asyncio", "create_async_engine"), ("aiohttp", "ClientSession"),
                  ("asyncpg", "create_pool"), ("httpx", "AsyncClient")}
LOOP_STARTERS = {"run", "new_event_loop", "Runner"}  # asyncio.<name>: starts an event loop of its own


class Names:
    """One module, walked once: how it spells asyncio's and threading's objects (import asyncio as
    aio, from asyncio import Lock), its nodes, their parents and its functions."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.parents = {child: node for node in self.nodes for child in ast.iter_child_nodes(node)}
        self.functions = [n for n in self.nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        self._inside: dict[ast.AST, list] = {}
        self._loops: dict[ast.AST, set] = {}
        self.modules: dict[str, str] = {}  # local name -> module ("aio" -> "asyncio")
        self.objects: dict[str, tuple[str, str]] = {}  # local name -> (module, name) ("L" -> ("asyncio", "Lock"))
        for node in self.nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.modules[alias.asname or alias.name.split(".")[0]] = \
                        alias.name if alias.asname else alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.objects[alias.asname or alias.name] = (node.module, alias.name)

    def walk(self, scope: ast.AST) -> list:
        """Every node under `scope` (the module, or a function), computed once."""
        if scope is self.tree:
            return self.nodes
        if scope not in self._inside:
            self._inside[scope] = list(ast.walk(scope))
        return self._inside[scope]

    def loop_names(self, scope: ast.AST) -> set[str]:
        """Names a function assigns an event loop to (loop = asyncio.get_running_loop())."""
        if scope is self.tree:
            return set()
        if scope not in self._loops:
            self._loops[scope] = {t.id for node in self.walk(scope) if isinstance(node, ast.Assign)
                                  and _is_loop_call(node.value, self) for t in node.targets if isinstance(t, ast.Name)}
        return self._loops[scope]

    def resolve(self, func: ast.expr) -> tuple[str, str] | None:
        """(module, name) that a called expression refers to, when the module spells it out."""
        if isinstance(func, ast.Name):
            return self.objects.get(func.id)
        if isinstance(func, ast.Attribute):
            parts, value = [func.attr], func.value
            while isinstance(value, ast.Attribute):
                parts.append(value.attr)
                value = value.value
            if isinstance(value, ast.Name):
                head = self.modules.get(value.id) or \
                    (".".join(self.objects[value.id]) if value.id in self.objects else None)
                if head:
                    path = [head, *reversed(parts)]
                    return ".".join(path[:-1]), path[-1]
        return None

    def asyncio_bound(self, node) -> str | None:
        """The name of the loop-bound asyncio class `node` creates (asyncio.Lock(), Lock(), aio.locks.Lock())."""
        if not isinstance(node, ast.Call):
            return None
        found = self.resolve(node.func)
        if found is None:
            return None
        module, name = found
        if name in LOOP_BOUND and (module == "asyncio" or module in {f"asyncio.{m}" for m in ASYNCIO_SUBMODULES}):
            return name
        return None

    def is_call_to(self, node, module: str, names: set[str]) -> bool:
        return isinstance(node, ast.Call) and (self.resolve(node.func) or (None, None)) in {(module, n) for n in names}


def _module_statements(body) -> Iterator[ast.stmt]:
    """Statements that run at import: the module's, and those inside its if/try/with blocks."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody"):
                yield from _module_statements(getattr(node, field, []))
            for handler in getattr(node, "handlers", []):
                yield from _module_statements(handler.body)


def _assigned_value(node) -> ast.expr | None:
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return node.value
    return None


def _global_stores(tree: ast.Module, names: "Names") -> Iterator[ast.Assign]:
    """Assignments, inside functions, to a name the function declares `global`; not in a function
    that asks for the running loop, which is how a global is rebuilt for each new loop."""
    for function in names.functions:
        declared = {name for n in names.walk(function) if isinstance(n, ast.Global) for name in n.names}
        if not declared or names.loop_names(function):
            continue
        for node in names.walk(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id in declared for t in targets):
                    yield node


# --- LK01 ---------------------------------------------------------------------------

def lk01(tree: ast.Module, names: Names):
    """Loop-bound asyncio objects that outlive their loop."""
    for node in _module_statements(tree.body):
        made = names.asyncio_bound(_assigned_value(node))
        if made:
            yield "LK01", node, (f"a module-level asyncio.{made} binds to the first event loop that waits on it; "
                                 "every later loop (a warm invocation, a test, a thread's asyncio.run) "
                                 "then fails with 'is bound to a different event loop'")
    classes = [n for n in names.walk(tree) if isinstance(n, ast.ClassDef)]
    makers = {}  # class name -> (asyncio class, line) its __init__ creates
    for cls in classes:
        for node in cls.body:
            made = names.asyncio_bound(_assigned_value(node))
            if made:
                yield "LK01", node, (f"a class attribute asyncio.{made} is shared by every instance and every "
                                     "event loop, and binds to the first loop that waits on it")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "__init__":
                for inner in ast.walk(node):
                    made = names.asyncio_bound(inner)
                    if made:
                        makers.setdefault(cls.name, (made, inner.lineno))
    if not makers:
        return
    kept = [(node, "a module global") for node in _module_statements(tree.body) if _assigned_value(node)]
    kept += [(node, "a module global") for node in _global_stores(tree, names)]
    for function in names.functions:  # @lru_cache / @cache functions keep what they return
        decorators = {d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
                      for d in (x.func if isinstance(x, ast.Call) else x for x in function.decorator_list)}
        if decorators & {"lru_cache", "cache"}:
            kept += [(n, f"the cache of {function.name}()") for n in names.walk(function)
                     if isinstance(n, ast.Return) and n.value is not None]
    for node, holder in kept:
        value = node.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in makers:
            made, line = makers[value.func.id]
            yield "LK01", node, (f"{holder} keeps a {value.func.id}, whose __init__ creates an asyncio.{made} "
                                 f"(line {line}): it outlives the event loop it binds to, and fails on the next one")


# --- LK02 and LK03: objects keyed by an event loop ----------------------------------------

def _is_loop_call(node, names: Names) -> bool:
    if not isinstance(node, ast.Call):
        return False
    found = names.resolve(node.func)
    if found and found[0] == "asyncio" and found[1] in LOOP_GETTERS:
        return True
    return isinstance(node.func, ast.Attribute) and node.func.attr in ("get_running_loop", "get_event_loop")


def _is_loop(node, loops: set[str], names: Names) -> bool:
    if _is_loop_call(node, names):
        return True
    if isinstance(node, ast.Name):
        return node.id in loops or node.id in ("loop", "event_loop")
    if isinstance(node, ast.Attribute):
        return node.attr in ("loop", "_loop", "event_loop", "_event_loop")
    return False


def lk02(tree: ast.Module, names: Names):
    """id() or hash() of an event loop, compared or used as a key."""
    parents = names.parents
    for scope in [tree, *names.functions]:
        loops = names.loop_names(scope)
        for node in names.walk(scope):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in ("id", "hash") and len(node.args) == 1
                    and _is_loop(node.args[0], loops, names)):
                continue
            parent = parents.get(node)
            used = isinstance(parent, (ast.Compare, ast.Subscript, ast.Dict, ast.Assign, ast.AnnAssign)) or \
                (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)
                 and parent.func.attr in ("get", "setdefault", "pop", "__contains__"))
            if used:
                yield "LK02", node, (f"{node.func.id}() of an event loop is only unique while that loop is alive: "
                                     "a new loop can get a dead loop's id, and then looks like it; hold the loop "
                                     "through weakref.ref and compare with `is`")


def _released(names: "Names", mapping: ast.expr) -> bool:
    """Does the module let go of this mapping's entries: weak values, or a `del`/`pop` on it?"""
    spelled = ast.unparse(mapping)  # unparse: the same spelling whether stored or loaded
    for node in names.nodes:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(ast.unparse(t) == spelled for t in targets) and isinstance(node.value, ast.Call) \
                and "WeakValueDictionary" in ast.dump(node.value.func):
            return True
        if isinstance(node, ast.Delete) and any(isinstance(t, ast.Subscript) and ast.unparse(t.value) == spelled
                                                for t in node.targets):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "clear") \
                and ast.unparse(node.func.value) == spelled:
            return True
    return False


def lk03(tree: ast.Module, names: Names):
    """A mapping keyed by an event loop whose values are loop-bound objects (and nothing lets go of them)."""
    for scope in [tree, *names.functions]:
        loops = names.loop_names(scope)
        for node in names.walk(scope):
            if isinstance(node, ast.Assign) and names.asyncio_bound(node.value):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and _is_loop(target.slice, loops, names) \
                            and not _released(names, target.value):
                        yield "LK03", node, (
                            f"an asyncio.{names.asyncio_bound(node.value)} stored under its event loop holds "
                            "that loop (it binds to it): in a WeakKeyDictionary the entry never goes, in a dict "
                            "nothing removes it, so every loop stays alive")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "setdefault" and len(node.args) == 2 \
                    and _is_loop(node.args[0], loops, names) and names.asyncio_bound(node.args[1]) \
                    and not _released(names, node.func.value):
                yield "LK03", node, (
                    f"an asyncio.{names.asyncio_bound(node.args[1])} stored under its event loop holds that loop: "
                    "the entry can never go, so every loop stays alive")


# --- LK04: tasks nobody keeps (what RUF006 does not see) ------------------------------------

_TASK_MAKERS = {"create_task", "ensure_future"}
_NOT_A_REFERENCE = {"add_done_callback", "set_name", "get_name", "remove_done_callback"}


def _makes_task(node, loops: set[str], names: Names) -> str | None:
    """'loop.create_task' / 'asyncio.ensure_future' if `node` starts a task the loop holds only weakly."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr == "create_task" and _is_loop(func.value, loops, names):
        return "loop.create_task"
    if names.is_call_to(node, "asyncio", {"create_task"}):
        return "asyncio.create_task"
    if names.is_call_to(node, "asyncio", {"ensure_future"}):
        return "asyncio.ensure_future"
    return None


def lk04(tree: ast.Module, names: Names):
    for function in names.functions:
        loops = names.loop_names(function)
        for node in names.walk(function):
            if isinstance(node, ast.Expr):
                made = _makes_task(node.value, loops, names)
                if made and made != "asyncio.create_task":  # RUF006 reports the bare asyncio.create_task
                    yield "LK04", node, (f"the task {made} returns is dropped: the event loop keeps only a weak "
                                         "reference, so a garbage collection can destroy it mid-await")
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                made = _makes_task(node.value, loops, names)
                if not made:
                    continue
                name = node.targets[0].id
                uses = [n for n in names.walk(function) if isinstance(n, ast.Name) and n.id == name
                        and isinstance(n.ctx, ast.Load)]
                parents = names.parents
                kept = [u for u in uses if not (isinstance(parents.get(u), ast.Attribute)
                                                and parents[u].attr in _NOT_A_REFERENCE)]
                # An async function that goes on awaiting keeps its local (and the task) meanwhile:
                # flagged only where the function ends without awaiting anything after it.
                later = [n for n in names.walk(function) if isinstance(n, (ast.Await, ast.AsyncFor, ast.AsyncWith))
                         and n.lineno > node.lineno]
                if not kept and not later:
                    yield "LK04", node, (f"the task in `{name}` is referenced only by this local (a done callback "
                                         "is not a reference): once the function returns, a garbage collection "
                                         "can destroy it mid-await")


# --- LK05: a thread lock taken again by the thread that holds it ---------------------------

def _thread_locks(tree: ast.Module, names: Names) -> set[str]:
    """Module-level names bound to a non-reentrant threading.Lock()."""
    found = set()
    for node in _module_statements(tree.body):
        value = _assigned_value(node)
        if names.is_call_to(value, "threading", {"Lock"}):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found |= {t.id for t in targets if isinstance(t, ast.Name)}
    return found


def _with_locks(node: ast.With | ast.AsyncWith, locks: set[str], holders: dict) -> list[tuple[str, str | None]]:
    """(lock, through) for each lock a `with` statement takes: directly, or through a holder function."""
    taken = []
    for item in node.items:
        expr = item.context_expr
        if isinstance(expr, ast.Name) and expr.id in locks:
            taken.append((expr.id, None))
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in holders:
            taken += [(lock, expr.func.id) for lock in holders[expr.func.id]]
    return taken


def lk05(tree: ast.Module, names: Names):
    locks = _thread_locks(tree, names)
    if not locks:
        return
    functions = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    # context managers that yield while holding a lock: `with guard(path):` holds what guard holds
    holders = {}
    for name, function in functions.items():
        for node in names.walk(function):
            if isinstance(node, ast.With):
                held = [lock for lock, _ in _with_locks(node, locks, {})]
                if held and any(isinstance(n, (ast.Yield, ast.YieldFrom)) for b in node.body for n in ast.walk(b)):
                    holders.setdefault(name, set()).update(held)
    # what each function takes, itself or through the module's functions it calls
    direct = {name: {lock for n in names.walk(f) if isinstance(n, ast.With)
                     for lock, _ in _with_locks(n, locks, {})} for name, f in functions.items()}
    calls = {name: {n.func.id for n in names.walk(f) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                    and n.func.id in functions} for name, f in functions.items()}
    takes = {name: set(v) for name, v in direct.items()}
    changed = True
    while changed:
        changed = False
        for name in functions:
            for callee in calls[name]:
                if not takes[callee] <= takes[name]:
                    takes[name] |= takes[callee]
                    changed = True
    for name, function in functions.items():
        for node in names.walk(function):
            if not isinstance(node, ast.With):
                continue
            for lock, through in _with_locks(node, locks, holders):
                how = f"through {through}()" if through else "here"
                for inner in (n for b in node.body for n in ast.walk(b)):
                    if isinstance(inner, ast.With):
                        for again, _ in _with_locks(inner, locks, holders):
                            if again == lock:
                                yield "LK05", inner, (f"{name}() takes `{lock}` again while it holds it ({how}): "
                                                      "threading.Lock is not reentrant, so the thread waits for "
                                                      "itself forever")
                    elif isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                            and lock in takes.get(inner.func.id, ()):
                        yield "LK05", inner, (f"{name}() calls {inner.func.id}(), which takes `{lock}`, while it "
                                              f"holds `{lock}` ({how}): threading.Lock is not reentrant, so the "
                                              "thread waits for itself forever")


# --- LK06: a pooled client shared by several event loops --------------------------------

def starts_loops(tree: ast.Module, names: Names) -> bool:
    """Does this module start event loops of its own (asyncio.run, new_event_loop, asyncio.Runner)?"""
    return any(names.is_call_to(n, "asyncio", LOOP_STARTERS) for n in names.walk(tree))


def _pooled_client(node, names: Names) -> str | None:
    if isinstance(node, ast.Call):
        found = names.resolve(node.func)
        if found and any(found[1] == name and found[0].startswith(module) for module, name in POOLED_CLIENTS):
            return found[1]
    return None


def keeps_loops_apart(tree: ast.Module, names: Names) -> bool:
    """Does this module give other loops a way around a shared client: hand coroutines to the
    client's own loop (run_coroutine_threadsafe), or open a client per call and close it there?"""
    if any(names.is_call_to(n, "asyncio", {"run_coroutine_threadsafe"}) for n in names.walk(tree)):
        return True
    for function in names.functions:
        opened = any(_pooled_client(n, names) for n in names.walk(function))
        closed = any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr in ("dispose", "close", "aclose") for n in names.walk(function))
        if opened and closed:
            return True
    return False


def lk06(tree: ast.Module, names: Names, package_starts_loops: bool):
    if not package_starts_loops:
        return
    for node in _module_statements(tree.body):
        value = _assigned_value(node)
        client = _pooled_client(value, names)
        if client:
            yield "LK06", node, (f"a module-level {client}() pools connections on the event loop that opens "
                                 "them, and this package also starts event loops of its own (asyncio.run): "
                                 "a connection used from another loop fails, or crashes the process")


def check(names: Names, package_starts_loops: bool):
    """Every (rule, node, sentence) the Python rules find in one module."""
    tree = names.tree
    yield from lk01(tree, names)
    yield from lk02(tree, names)
    yield from lk03(tree, names)
    yield from lk04(tree, names)
    yield from lk05(tree, names)
    yield from lk06(tree, names, package_starts_loops)
