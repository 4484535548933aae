"""The rules that read Python source: LK01, LK02, LK03, LK04 (what ruff's RUF006 misses), LK05, LK06.

Each rule is a function of one parsed module (LK06 also needs to know whether
the module's package runs event loops) that yields (rule, node, sentence).
They read the syntax only: no import, no type inference, so a name is judged
by how this module spells and assigns it.
"""
from __future__ import annotations

import ast
import functools
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
    aio, from asyncio import Lock), its nodes, their parents, its functions, classes and
    assignments, and every identifier it spells (a rule whose words a module never spells,
    `anext` or `call_next`, has nothing to read there)."""

    def __init__(self, tree: ast.Module):
        self.tree = tree
        self.nodes = list(ast.walk(tree))
        self.parents = {child: node for node in self.nodes for child in ast.iter_child_nodes(node)}
        self.functions, self.classes, self.assigns = [], [], []
        self.identifiers: set[str] = set()
        self._inside: dict[ast.AST, list] = {}
        self._loops: dict[ast.AST, set] = {}
        self.modules: dict[str, str] = {}  # local name -> module ("aio" -> "asyncio")
        self.objects: dict[str, tuple[str, str]] = {}  # local name -> (module, name) ("L" -> ("asyncio", "Lock"))
        for node in self.nodes:
            kind = type(node)
            if kind is ast.Name:
                self.identifiers.add(node.id)
            elif kind is ast.Attribute:
                self.identifiers.add(node.attr)
            elif kind is ast.keyword or kind is ast.arg:
                self.identifiers.add(node.arg)
            elif kind is ast.Assign or kind is ast.AnnAssign:
                self.assigns.append(node)
            elif kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
                self.functions.append(node)
            elif kind is ast.ClassDef:
                self.classes.append(node)
            elif isinstance(node, ast.Import):
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


# --- what lives as long as the process (LK01, LK06) ----------------------------------

def _decorators(function) -> set[str]:
    return {d.attr if isinstance(d, ast.Attribute) else getattr(d, "id", None)
            for d in (x.func if isinstance(x, ast.Call) else x for x in function.decorator_list)}


def _returned(node: ast.Return, function, names: Names) -> ast.expr:
    """What a `return` hands back: its expression, or what the function assigned to the name it returns."""
    if isinstance(node.value, ast.Name):
        for n in names.walk(function):
            if _assigned_value(n) is not None and any(isinstance(t, ast.Name) and t.id == node.value.id
                                                      for t in _targets(n)):
                return n.value
    return node.value


def _targets(node) -> list:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


def _classes(names: Names) -> list[ast.ClassDef]:
    return names.classes


def _enclosing_function(node, names: Names):
    parent = names.parents.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parent = names.parents.get(parent)
    return parent


def _class_stores(names: Names) -> Iterator[ast.Assign]:
    """`cls.x = ...` in a classmethod and `Name.x = ...` for a class of the module, in functions
    that do not ask for the running loop (which is how a value is rebuilt for each new loop)."""
    classes = {c.name for c in _classes(names)}
    for node in names.assigns:
        if _assigned_value(node) is None:
            continue
        owners = {t.value.id for t in _targets(node) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)}
        if not owners:
            continue
        function = _enclosing_function(node, names)
        if function is None or names.loop_names(function):
            continue
        first = function.args.args[0].arg if function.args.args else None
        if owners & (classes | ({first} if first and "classmethod" in _decorators(function) else set())):
            yield node


def _kept(tree: ast.Module, names: Names) -> Iterator[tuple[ast.AST, str, ast.expr]]:
    """(node, what keeps it, the expression kept) for every value that lives as long as the
    process: module globals (set at import or through `global`), class attributes (in the
    class body, or set on the class later), and what an @lru_cache / @cache function returns."""
    for node in _module_statements(tree.body):
        if _assigned_value(node) is not None:
            yield node, "module", node.value
    for node in _global_stores(tree, names):
        yield node, "global", node.value
    for cls in _classes(names):
        for node in _module_statements(cls.body):
            if _assigned_value(node) is not None:
                yield node, "class", node.value
    for node in _class_stores(names):
        yield node, "class", node.value
    for function in names.functions:
        if _decorators(function) & {"lru_cache", "cache"}:
            for n in names.walk(function):
                if isinstance(n, ast.Return) and n.value is not None:
                    yield n, f"the cache of {function.name}()", _returned(n, function, names)


def _makers(names: Names, makes) -> dict[str, tuple[str, int, str]]:
    """class name -> (what, line, where) for the classes whose every instance creates `what`
    (`makes(expr)` names it): in __init__, a dataclass's __post_init__, or a field's default_factory."""
    found = {}
    for cls in _classes(names):
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("__init__", "__post_init__"):
                for inner in ast.walk(node):
                    made = makes(inner)
                    if made:
                        found.setdefault(cls.name, (made, inner.lineno, node.name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.value, ast.Call):
                for keyword in node.value.keywords:
                    made = keyword.arg == "default_factory" and makes(ast.Call(keyword.value, [], []))
                    if made:
                        found.setdefault(cls.name, (made, node.lineno, "default_factory"))
    return found


def _made_by_maker(value, makers: dict) -> tuple[str, tuple] | None:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in makers:
        return value.func.id, makers[value.func.id]
    return None


# --- LK01 ---------------------------------------------------------------------------

_HOLDERS = {"module": "a module global", "global": "a module global", "class": "a class attribute"}


def lk01(tree: ast.Module, names: Names):
    """Loop-bound asyncio objects that outlive their loop."""
    makers = _makers(names, names.asyncio_bound)
    for node, kind, value in _kept(tree, names):
        made = names.asyncio_bound(value)
        if made and kind == "module":
            yield "LK01", node, (f"a module-level asyncio.{made} binds to the first event loop that waits on it; "
                                 "every later loop (a warm invocation, a test, a thread's asyncio.run) "
                                 "then fails with 'is bound to a different event loop'")
        elif made and kind == "class":
            yield "LK01", node, (f"a class attribute asyncio.{made} is shared by every instance and every "
                                 "event loop, and binds to the first loop that waits on it")
        elif made:
            yield "LK01", node, (f"{_HOLDERS.get(kind, kind)} keeps this asyncio.{made}: it binds to the first "
                                 "event loop that waits on it, and fails on the next one")
        elif found := _made_by_maker(value, makers):
            name, (made, line, where) = found
            yield "LK01", node, (f"{_HOLDERS.get(kind, kind)} keeps a {name}, whose {where} creates an "
                                 f"asyncio.{made} (line {line}): it outlives the event loop it binds to, and "
                                 "fails on the next one")
    yield from _per_key_primitives(tree, names)


def _shared_mappings(tree: ast.Module, names: Names) -> tuple[set[str], dict[str, set[str]]]:
    """Module-level names, and each class's class attributes, bound to a dict (a WeakValueDictionary
    lets a lock go once nobody waits on it, so it is not one)."""
    def is_mapping(value) -> bool:
        return isinstance(value, (ast.Dict, ast.DictComp)) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None))
            in ("dict", "defaultdict", "OrderedDict"))

    module = {t.id for node in _module_statements(tree.body) if is_mapping(_assigned_value(node))
              for t in _targets(node) if isinstance(t, ast.Name)}
    per_class = {cls.name: {t.id for node in cls.body if is_mapping(_assigned_value(node))
                            for t in _targets(node) if isinstance(t, ast.Name)} for cls in _classes(names)}
    return module, per_class


def _keyed_by_loop(key, loops: set[str], names: Names) -> bool:
    parts = key.elts if isinstance(key, ast.Tuple) else [key]
    return any(_is_loop(p, loops, names) or _loop_id(p, loops, names) for p in parts)


def _per_key_primitives(tree: ast.Module, names: Names):
    """A per-key asyncio primitive stored in a mapping the process keeps: a module-level dict
    (or a class attribute's), or a module-level defaultdict(asyncio.Lock)."""
    for node in _module_statements(tree.body):
        value = _assigned_value(node)
        if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None)) == \
                "defaultdict" and value.args and names.asyncio_bound(ast.Call(value.args[0], [], [])):
            made = names.asyncio_bound(ast.Call(value.args[0], [], []))
            yield "LK01", node, (f"a module-level defaultdict(asyncio.{made}) keeps one {made} per key for the "
                                 "life of the process: each binds to the first event loop that waits on it, and "
                                 "fails on the next one")
    module, per_class = _shared_mappings(tree, names)
    if not module and not any(per_class.values()):
        return
    owner = {f: cls for cls in _classes(names) for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for function in names.functions:
        loops = names.loop_names(function)
        shared = set(module)
        if function in owner:
            shared |= {f"self.{a}" for a in per_class[owner[function].name]} | \
                      {f"{owner[function].name}.{a}" for a in per_class[owner[function].name]}
        if not shared:
            continue
        for node in names.walk(function):
            if isinstance(node, ast.Assign) and names.asyncio_bound(node.value):
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and ast.unparse(target.value) in shared \
                            and not _keyed_by_loop(target.slice, loops, names):
                        yield "LK01", node, _per_key(names.asyncio_bound(node.value), ast.unparse(target.value))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "setdefault" and len(node.args) == 2 \
                    and ast.unparse(node.func.value) in shared and names.asyncio_bound(node.args[1]) \
                    and not _keyed_by_loop(node.args[0], loops, names):
                yield "LK01", node, _per_key(names.asyncio_bound(node.args[1]), ast.unparse(node.func.value))


def _per_key(made: str, mapping: str) -> str:
    return (f"an asyncio.{made} stored per key in `{mapping}`, which the process keeps, binds to the first "
            "event loop that waits on it: the next loop that takes the same key fails with 'is bound to a "
            "different event loop'")


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


def _loop_id(node, loops: set[str], names: Names) -> bool:
    """Is `node` id(loop) or hash(loop)?"""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("id", "hash") \
        and len(node.args) == 1 and _is_loop(node.args[0], loops, names)


def lk02(tree: ast.Module, names: Names):
    """id() or hash() of an event loop, compared or used as a key (alone, in a tuple, or in an f-string)."""
    parents = names.parents
    for scope in [tree, *names.functions]:
        loops = names.loop_names(scope)
        for node in names.walk(scope):
            if not _loop_id(node, loops, names):
                continue
            parent = parents.get(node)
            while isinstance(parent, (ast.Tuple, ast.FormattedValue, ast.JoinedStr)):  # (id(loop), dsn) is a key too
                parent = parents.get(parent)
            used = isinstance(parent, (ast.Compare, ast.Subscript, ast.Dict, ast.Assign, ast.AnnAssign)) or \
                (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Attribute)
                 and parent.func.attr in ("get", "setdefault", "pop", "__contains__"))
            if used:
                yield "LK02", node, (f"{node.func.id}() of an event loop is only unique while that loop is alive: "
                                     "a new loop can get a dead loop's id, and then looks like it; hold the loop "
                                     "through weakref.ref and compare with `is`")


def _same_mapping(node: ast.expr, spelled: str, attribute: str | None) -> bool:
    """Is `node` the mapping spelled `spelled`? An attribute is the same mapping whatever reaches
    it (`cls._clients`, `self.__class__._clients`, `Pool._clients`)."""
    if attribute is not None and isinstance(node, ast.Attribute):
        return node.attr == attribute
    return ast.unparse(node) == spelled


def _released(names: "Names", mapping: ast.expr) -> bool:
    """Does the module let go of this mapping's entries: weak values, or a `del`/`pop` on it?"""
    spelled = ast.unparse(mapping)  # unparse: the same spelling whether stored or loaded
    attribute = mapping.attr if isinstance(mapping, ast.Attribute) else None
    for node in names.nodes:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(_same_mapping(t, spelled, attribute) for t in targets) and isinstance(node.value, ast.Call) \
                and "WeakValueDictionary" in ast.dump(node.value.func):
            return True
        if isinstance(node, ast.Delete) and any(isinstance(t, ast.Subscript) and _same_mapping(t.value, spelled, attribute)
                                                for t in node.targets):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("pop", "clear") \
                and _same_mapping(node.func.value, spelled, attribute):
            return True
    return False


def _injected(names: Names) -> set[str]:
    """Attributes set from a parameter (`self._factory = factory`): a callable handed in."""
    found = set()
    for function in names.functions:
        params = {a.arg for a in function.args.args + function.args.kwonlyargs} - {"self", "cls"}
        for node in names.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id in params:
                found |= {t.attr for t in node.targets if isinstance(t, ast.Attribute)}
    return found


def _made_per_loop(value, params: set[str], injected: set[str], names: Names) -> str | None:
    """What `value` makes that binds to the loop it is made on: an asyncio primitive, a pooled
    client, or whatever a factory handed in (a parameter, or an attribute set from one) builds."""
    made = names.asyncio_bound(value)
    if made:
        return f"an asyncio.{made}"
    client = _pooled_client(value, names)
    if client:
        return f"a {client}"
    if isinstance(value, ast.Await):
        value = value.value
    if isinstance(value, ast.Call):
        func = value.func
        if isinstance(func, ast.Name) and func.id in params:
            return f"what {func.id}() makes"
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self" \
                and func.attr in injected:
            return f"what self.{func.attr}() makes"
    return None


def lk03(tree: ast.Module, names: Names):
    """A mapping keyed by an event loop (or its id) whose values are bound to that loop (and nothing lets go of them)."""
    injected = _injected(names)
    for scope in [tree, *names.functions]:
        loops = names.loop_names(scope)
        # a factory handed in: a parameter, but not the self or cls a method is called on
        params = set() if scope is tree else {a.arg for a in scope.args.args[1:] + scope.args.kwonlyargs} | \
            ({scope.args.args[0].arg} - {"self", "cls"} if scope.args.args else set())
        for node in names.walk(scope):
            if isinstance(node, ast.Assign):
                made = _made_per_loop(node.value, params, injected, names)
                if not made:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Subscript) and (_is_loop(target.slice, loops, names)
                                                              or _loop_id(target.slice, loops, names)) \
                            and not _released(names, target.value):
                        yield "LK03", node, (
                            f"{made} stored under its event loop holds that loop (it binds to it): in a "
                            "WeakKeyDictionary the entry never goes, in a dict nothing removes it, so every loop "
                            "stays alive")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "setdefault" and len(node.args) == 2 \
                    and (_is_loop(node.args[0], loops, names) or _loop_id(node.args[0], loops, names)) \
                    and not _released(names, node.func.value):
                made = _made_per_loop(node.args[1], params, injected, names)
                if made:
                    yield "LK03", node, (
                        f"{made} stored under its event loop holds that loop: the entry can never go, so "
                        "every loop stays alive")


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


def _wait_drops_pending(node: ast.Await, function, names: Names) -> bool:
    """`await asyncio.wait([create_task(...), ...], timeout=...)` whose pending set nobody keeps."""
    call = node.value
    if not (names.is_call_to(call, "asyncio", {"wait"}) and call.args):
        return False
    loops = names.loop_names(function)
    first = call.args[0]
    made = [first.elt] if isinstance(first, (ast.ListComp, ast.SetComp, ast.GeneratorExp)) else \
        list(first.elts) if isinstance(first, (ast.List, ast.Set, ast.Tuple)) else []
    if not any(_makes_task(m, loops, names) for m in made):
        return False
    options = {k.arg: k.value for k in call.keywords}
    returns_early = "timeout" in options or (
        "return_when" in options and not ast.unparse(options["return_when"]).endswith("ALL_COMPLETED"))
    if not returns_early:  # without a timeout, asyncio.wait returns when every task is done
        return False
    parent = names.parents.get(node)
    if isinstance(parent, ast.Expr):
        return True
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Tuple) \
            and len(parent.targets[0].elts) == 2:
        pending = parent.targets[0].elts[1]
        return isinstance(pending, ast.Name) and not any(
            isinstance(n, ast.Name) and n.id == pending.id and isinstance(n.ctx, ast.Load) for n in names.walk(function))
    return False


def lk04_wait(tree: ast.Module, names: Names):
    if "wait" not in names.identifiers:
        return
    for function in names.functions:
        for node in names.walk(function):
            if isinstance(node, ast.Await) and _wait_drops_pending(node, function, names):
                yield "LK04", node, ("the tasks created in the list passed to asyncio.wait are referenced only by "
                                     "it, and the pending set it returns is dropped: a task still running is then "
                                     "held by nobody (the event loop keeps only a weak reference), so a garbage "
                                     "collection can destroy it mid-await, and nothing cancels it")

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


def _self_attr(node, me: str) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == me:
        return node.attr
    return None


def _locks_taken(with_node: ast.With, me: str, locks: set[str]) -> list[str]:
    """The instance locks (`with self._lock:`) a `with` statement takes."""
    return [a for item in with_node.items if (a := _self_attr(item.context_expr, me)) in locks]


def _member_run(node, me: str, methods: dict, properties: set[str]) -> str | None:
    """The class's own method (`self.m(...)`) or property (`self.p`) that `node` runs, if any."""
    if isinstance(node, ast.Call) and _self_attr(node.func, me) in methods:
        return node.func.attr
    if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _self_attr(node, me) in properties:
        return node.attr
    return None


def lk05_instance(tree: ast.Module, names: Names):
    """An instance's threading.Lock (`self._lock`) taken again through the class's own methods or properties."""
    for cls in _classes(names):
        methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.args.args}
        locks = {t.id for node in cls.body if names.is_call_to(_assigned_value(node), "threading", {"Lock"})
                 for t in _targets(node) if isinstance(t, ast.Name)}
        for f in methods.values():
            me = f.args.args[0].arg
            locks |= {_self_attr(t, me) for n in names.walk(f) if isinstance(n, ast.Assign)
                      and names.is_call_to(n.value, "threading", {"Lock"}) for t in n.targets} - {None}
        if not locks:
            continue
        properties = {name for name, f in methods.items() if "property" in _decorators(f)}
        taken = functools.partial(_locks_taken, locks=locks)
        reached = functools.partial(_member_run, methods=methods, properties=properties)

        takes, calls = {}, {}
        for name, f in methods.items():
            me = f.args.args[0].arg
            takes[name] = {lock for n in names.walk(f) if isinstance(n, ast.With) for lock in taken(n, me)}
            calls[name] = {r for n in names.walk(f) if (r := reached(n, me))}
        changed = True
        while changed:
            changed = False
            for name in methods:
                for callee in calls[name]:
                    if not takes[callee] <= takes[name]:
                        takes[name] |= takes[callee]
                        changed = True
        for name, f in methods.items():
            me = f.args.args[0].arg
            for node in names.walk(f):
                if not isinstance(node, ast.With):
                    continue
                for lock in taken(node, me):
                    for inner in (n for b in node.body for n in ast.walk(b)):
                        if isinstance(inner, ast.With) and lock in taken(inner, me):
                            yield "LK05", inner, (f"{cls.name}.{name}() takes `{me}.{lock}` again while it holds it: "
                                                  "threading.Lock is not reentrant, so the thread waits for itself "
                                                  "forever")
                        elif (callee := reached(inner, me)) and lock in takes[callee]:
                            how = "reads the property" if callee in properties else "calls"
                            yield "LK05", inner, (f"{cls.name}.{name}() {how} {me}.{callee}, which takes `{me}.{lock}`, "
                                                  f"while it holds `{me}.{lock}`: threading.Lock is not reentrant, "
                                                  "so the thread waits for itself forever")

# --- LK06: a pooled client shared by several event loops --------------------------------

def starts_loops(tree: ast.Module, names: Names) -> bool:
    """Does this module start event loops of its own (asyncio.run, new_event_loop, asyncio.Runner)?"""
    return any(names.is_call_to(n, "asyncio", LOOP_STARTERS) for n in names.walk(tree))


def _pooled_client(node, names: Names) -> str | None:
    if isinstance(node, ast.Call) and not _unpooled_engine(node, names):
        found = names.resolve(node.func)
        if found and any(found[1] == name and found[0].startswith(module) for module, name in POOLED_CLIENTS):
            return found[1]
    return None


def _unpooled_engine(node: ast.Call, names: Names) -> bool:
    """Is this an engine made with `poolclass=NullPool`, which keeps no connection between checkouts?"""
    for keyword in node.keywords:
        if keyword.arg == "poolclass":
            found = names.resolve(keyword.value)
            return (found[1] if found else getattr(keyword.value, "id", "")) == "NullPool"
    return False


def keeps_loops_apart(tree: ast.Module, names: Names) -> bool:
    """Does this module give other loops a way around a shared client: hand coroutines to the
    client's own loop (run_coroutine_threadsafe), make an engine that pools nothing (NullPool),
    or open a client per call and close it there?"""
    if any(names.is_call_to(n, "asyncio", {"run_coroutine_threadsafe"}) for n in names.walk(tree)):
        return True
    if any(isinstance(n, ast.Call) and _unpooled_engine(n, names) for n in names.walk(tree)):
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
    makers = _makers(names, lambda node: _pooled_client(node, names))
    for node, kind, value in _kept(tree, names):
        if kind == "global":  # set lazily, maybe on the one loop a container keeps: only its import is judged
            continue
        client = _pooled_client(value, names)
        if client and kind == "module":
            yield "LK06", node, (f"a module-level {client}() pools connections on the event loop that opens "
                                 "them, and this package also starts event loops of its own (asyncio.run): "
                                 "a connection used from another loop fails, or crashes the process")
        elif client:
            yield "LK06", node, (f"{_HOLDERS.get(kind, kind)} keeps this {client}(), which pools connections on "
                                 "the event loop that opens them, and this package also starts event loops of its "
                                 "own (asyncio.run): a connection used from another loop fails, or crashes the "
                                 "process")
        elif found := _made_by_maker(value, makers):
            name, (client, line, where) = found
            yield "LK06", node, (f"{_HOLDERS.get(kind, kind)} keeps a {name}, whose {where} creates a {client}() "
                                 f"(line {line}) that pools connections on the event loop that opens them, and "
                                 "this package also starts event loops of its own (asyncio.run): a connection "
                                 "used from another loop fails, or crashes the process")


def check(names: Names, package_starts_loops: bool):
    """Every (rule, node, sentence) the Python rules find in one module."""
    tree = names.tree
    yield from lk01(tree, names)
    yield from lk02(tree, names)
    yield from lk03(tree, names)
    yield from lk04(tree, names)
    yield from lk04_wait(tree, names)
    yield from lk05(tree, names)
    yield from lk05_instance(tree, names)
    yield from lk06(tree, names, package_starts_loops)
