"""LK15: pools, executors and worker counts sized from the host's CPUs instead of the CPU quota.

A container's CPU limit is a CFS quota in its cgroup (cpu.max on cgroup v2,
cpu.cfs_quota_us / cpu.cfs_period_us on v1). `os.cpu_count()`,
`multiprocessing.cpu_count()` and `psutil.cpu_count()` count the host's CPUs;
`os.process_cpu_count()` and `os.sched_getaffinity(0)` count the CPUs the
process may run on (its affinity). None of them reads the quota: a pod limited
to 2 CPUs on a 64-core node starts 64 workers, which use up the quota early in
every period and are all stopped (throttled) until the next one.

Part A: a CPU count of the host that reaches a size, in the same module
(through local names, attributes of `self`, and the module's own functions
that return it): a pool's size (`ThreadPoolExecutor(max_workers=...)`,
`ProcessPoolExecutor(n)`, `multiprocessing.Pool(n)`), a keyword that says
how many run at once (`workers=`, `processes=`, `concurrency=`...), a name
that says so (`workers = multiprocessing.cpu_count() * 2 + 1`), a semaphore
or capacity limiter, or `for _ in range(n)` that starts a worker each time.
The count is flagged where it is read. A function that reads the cgroup (its
text names cpu.max, cfs_quota or a cgroup, or it calls such a function of the
module, or loky's/joblib's `cpu_count()`, which read the quota) consults the
quota: what it computes is left alone.

Part B: `ThreadPoolExecutor()` / `ProcessPoolExecutor()` / `multiprocessing.Pool()`
without a size, which sizes itself from the host's CPUs (min(32, CPUs + 4)
threads, one process per CPU), when it lives as long as the service: made the
loop's default executor (`loop.set_default_executor`), created at import or as
a class attribute, or kept on an object or a global. A pool in a `with` block
or a local is left alone.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from .python_rules import Names

HOST_COUNTS = {("os", "cpu_count"), ("multiprocessing", "cpu_count"), ("os", "process_cpu_count"),
               ("psutil", "cpu_count"), ("os", "sched_getaffinity"), ("multiprocessing.context", "cpu_count")}
QUOTA_AWARE_CALLS = {("loky", "cpu_count"), ("joblib", "cpu_count"), ("joblib.externals.loky", "cpu_count")}
QUOTA_TEXT = re.compile(r"cpu\.max|cfs_quota|cpu\.cfs|cgroup", re.IGNORECASE)
POOLS = {"ThreadPoolExecutor", "ProcessPoolExecutor", "Pool", "ThreadPool"}
POOL_SIZE = {"max_workers", "processes"}
LIMITERS = {"Semaphore", "BoundedSemaphore", "CapacityLimiter"}
SIZE_KEYWORDS = {"max_workers", "workers", "processes", "num_workers", "n_workers", "worker_count", "workers_count",
                 "concurrency", "max_concurrency", "threads", "num_threads", "n_threads", "max_threads", "pool_size",
                 "n_jobs", "jobs", "procs", "num_procs", "num_processes", "parallelism", "max_parallel"}
SIZE_WORDS = {"worker", "workers", "thread", "threads", "processes", "procs", "pool", "concurrency", "parallelism",
              "jobs", "njobs"}
MAX_CALL_DEPTH = 8
STARTS = {"create_task", "ensure_future", "Process", "Thread", "start", "submit", "spawn", "start_soon"}
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _own(statements) -> list[ast.AST]:
    """The nodes of a scope, without those of the functions defined in it."""
    found, stack = [], [s for s in statements if not isinstance(s, _FUNCTIONS)]
    while stack:
        node = stack.pop()
        found.append(node)
        stack += [c for c in ast.iter_child_nodes(node) if not isinstance(c, _FUNCTIONS)]
    return found


def _text(node) -> bool:
    """A string constant that is not a docstring (a docstring that names the quota reads nothing)."""
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _name_of(func: ast.expr) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return {w for w in spaced.split("_") if w}


def says_size(name: str) -> bool:
    return bool(_words(name) & SIZE_WORDS) and "processor" not in name.lower()


class _Module:
    def __init__(self, names: Names):
        self.names = names
        self.tree = names.tree
        self.functions = {f.name: f for f in names.functions}
        self.scope_of: dict[ast.AST, ast.AST] = {}
        self.nodes_of: dict[ast.AST, list[ast.AST]] = {self.tree: [n for n in _own(self.tree.body)]}
        for function in names.functions:
            self.nodes_of[function] = _own(function.body)
        for scope, nodes in self.nodes_of.items():
            for node in nodes:
                self.scope_of.setdefault(node, scope)
        # names the module binds to text that names the quota ("/sys/fs/cgroup/cpu.max")
        self.quota_constants = {t.id for node in self.tree.body if isinstance(node, ast.Assign)
                                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                                and QUOTA_TEXT.search(node.value.value) for t in node.targets
                                if isinstance(t, ast.Name)}
        self.assigned = {scope: self._assignments(nodes) for scope, nodes in self.nodes_of.items()}
        self.attributes: dict[str, list[ast.expr]] = {}  # self.x = value, in any method
        for nodes in self.nodes_of.values():
            for node in nodes:
                for target, value in _targets(node):
                    if isinstance(target, ast.Attribute) and getattr(target.value, "id", None) == "self":
                        self.attributes.setdefault(target.attr, []).append(value)
        self.aware = self._quota_aware()
        self.host_functions: dict[str, set[ast.Call]] = {}
        self._memo: dict[tuple, set[ast.Call]] = {}
        self._returns_host()

    @staticmethod
    def _assignments(nodes) -> dict[str, list[ast.expr]]:
        found: dict[str, list[ast.expr]] = {}
        for node in nodes:
            for target, value in _targets(node):
                if isinstance(target, ast.Name):
                    found.setdefault(target.id, []).append(value)
        return found

    def _reads_quota(self, scope) -> bool:
        docstrings = {id(n.value) for n in self.nodes_of[scope] if isinstance(n, ast.Expr)}
        for node in self.nodes_of[scope]:
            if _text(node) and id(node) not in docstrings and QUOTA_TEXT.search(node.value):
                return True
            if isinstance(node, ast.Name) and node.id in self.quota_constants:
                return True
            if isinstance(node, ast.Call) and self.names.resolve(node.func) in QUOTA_AWARE_CALLS:
                return True
        return False

    def _quota_aware(self) -> set[ast.AST]:
        aware = {scope for scope in self.nodes_of if self._reads_quota(scope)}
        calls = {scope: {_name_of(n.func) for n in nodes if isinstance(n, ast.Call)}
                 for scope, nodes in self.nodes_of.items()}
        changed = True
        while changed:
            changed = False
            aware_names = {f.name for f in aware if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for scope in self.nodes_of:
                if scope not in aware and calls[scope] & aware_names:
                    aware.add(scope)
                    changed = True
        return aware

    def _returns_host(self) -> None:
        for _ in range(MAX_CALL_DEPTH):  # a count handed up through at most this many functions
            self._memo: dict[tuple, set[ast.Call]] = {}
            changed = False
            for function in self.names.functions:
                if function in self.aware:
                    continue
                found: set[ast.Call] = set()
                for node in self.nodes_of[function]:
                    if isinstance(node, ast.Return) and node.value is not None:
                        found |= self.origins(node.value, function)
                if found - self.host_functions.get(function.name, set()):
                    self.host_functions[function.name] = found | self.host_functions.get(function.name, set())
                    changed = True
            if not changed:
                break
        self._memo = {}

    def _through(self, key: tuple, values: list[ast.expr], scope_of_value) -> set[ast.Call]:
        """The origins of what a name or attribute was assigned, each computed once (a cycle counts as none)."""
        if key not in self._memo:
            self._memo[key] = set()
            found: set[ast.Call] = set()
            for value in values:
                found |= self.origins(value, scope_of_value(value))
            self._memo[key] = found
        return self._memo[key]

    def origins(self, expr: ast.AST, scope: ast.AST) -> set[ast.Call]:
        """The host CPU counts (their calls) that `expr` is computed from, in `scope`."""
        found: set[ast.Call] = set()
        stack = [expr]
        while stack:
            node = stack.pop()
            if isinstance(node, _FUNCTIONS):
                continue
            if isinstance(node, ast.Call):
                called = self.names.resolve(node.func)
                if called in HOST_COUNTS:
                    found.add(node)
                    continue
                if called in QUOTA_AWARE_CALLS:
                    continue
                name = _name_of(node.func)
                if name in self.host_functions and (isinstance(node.func, ast.Name) or getattr(
                        node.func.value, "id", None) in ("self", "cls")):
                    found |= self.host_functions[name]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                if node.id in self.assigned.get(scope, {}):
                    found |= self._through((scope, node.id), self.assigned[scope][node.id], lambda _: scope)
                elif node.id in self.assigned[self.tree]:
                    found |= self._through((self.tree, node.id), self.assigned[self.tree][node.id],
                                           lambda _: self.tree)
            elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "self" \
                    and node.attr in self.attributes:
                found |= self._through(("self", node.attr), self.attributes[node.attr],
                                       lambda value: self.scope_of.get(value, scope))
            stack.extend(ast.iter_child_nodes(node))
        return found


def _targets(node) -> Iterator[tuple[ast.expr, ast.expr]]:
    if isinstance(node, ast.Assign):
        for target in node.targets:
            yield target, node.value
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)) and node.value is not None:
        yield node.target, node.value


def _pool_size(call: ast.Call) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg in POOL_SIZE:
            return keyword.value
    return call.args[0] if call.args else None


def _sized_by_default(call: ast.Call) -> bool:
    return _name_of(call.func) in ("ThreadPoolExecutor", "ProcessPoolExecutor", "Pool") and not call.args and not any(
        k.arg in POOL_SIZE or k.arg is None for k in call.keywords)


def _sinks(module: _Module, scope) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """(node, the value that sizes it, what it sizes) in one scope."""
    for node in module.nodes_of[scope]:
        if isinstance(node, ast.Call):
            name = _name_of(node.func)
            if name in POOLS and (size := _pool_size(node)) is not None:
                yield node, size, f"{name}'s size"
            elif name in LIMITERS and node.args:
                yield node, node.args[0], f"the {name}'s limit"
            else:
                for keyword in node.keywords:
                    if keyword.arg in SIZE_KEYWORDS:
                        yield node, keyword.value, f"`{keyword.arg}=`"
        for target, value in _targets(node):
            spelled = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
            if says_size(spelled):
                yield node, value, f"`{spelled}`"
        if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.iter, ast.Call) \
                and _name_of(node.iter.func) == "range" and node.iter.args \
                and any(isinstance(n, ast.Call) and _name_of(n.func) in STARTS for b in node.body for n in _own([b])):
            yield node, node.iter.args[-1 if len(node.iter.args) == 1 else 1], "the workers this loop starts"


def _spelled(module: _Module, call: ast.Call) -> str:
    found = module.names.resolve(call.func)
    return f"{found[0]}.{found[1]}()" if found else f"{_name_of(call.func)}()"


def _host_counts(module: _Module):
    flagged: dict[ast.Call, tuple[ast.AST, str]] = {}
    for scope in module.nodes_of:
        if scope in module.aware:
            continue
        for node, value, what in _sinks(module, scope):
            for origin in module.origins(value, scope):
                if module.scope_of.get(origin) in module.aware:
                    continue
                flagged.setdefault(origin, (node, what))
    for origin, (node, what) in flagged.items():
        where = "" if node.lineno == origin.lineno else f" (line {node.lineno})"
        counted = "the CPUs of the process's affinity" if _spelled(module, origin).split(".")[-1].startswith(
            ("process_cpu_count", "sched_getaffinity")) else "the host's CPUs"
        yield "LK15", origin, (
            f"{_spelled(module, origin)} counts {counted}, not the CPU quota of the container's cgroup, and it "
            f"sizes {what}{where}: a pod limited to 2 CPUs on a 64-core node runs 64 at once, uses up its quota "
            "early in every period and is throttled until the next one; size from the quota (cpu.max, "
            "cpu.cfs_quota_us / cpu.cfs_period_us) as well")


def _long_lived(module: _Module, call: ast.Call) -> str | None:
    """How a pool outlives the call that made it: 'the loop's default executor', 'kept at import'..., or None."""
    parent = module.names.parents.get(call)
    if isinstance(parent, ast.Call) and _name_of(parent.func) == "set_default_executor":
        return "the loop's default executor"
    scope = module.scope_of.get(call)
    if isinstance(parent, (ast.Assign, ast.AnnAssign)):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        if scope is module.tree:
            return "created at import" if not any(isinstance(a, ast.ClassDef) for a in _ancestors(module, call)) \
                else "a class attribute"
        for target in targets:
            if isinstance(target, ast.Attribute):
                return f"kept as `{ast.unparse(target)}`"
            if isinstance(target, ast.Name):
                if any(isinstance(n, ast.Global) and target.id in n.names for n in module.nodes_of.get(scope, [])):
                    return f"kept in the global `{target.id}`"
                for use in module.nodes_of.get(scope, []):  # pool = ThreadPoolExecutor(); loop.set_default_executor(pool)
                    if isinstance(use, ast.Call) and _name_of(use.func) == "set_default_executor" and any(
                            isinstance(a, ast.Name) and a.id == target.id for a in use.args):
                        return "the loop's default executor"
    return None


def _ancestors(module: _Module, node) -> Iterator[ast.AST]:
    while node in module.names.parents:
        node = module.names.parents[node]
        yield node


def _default_sized_pools(module: _Module):
    for node in module.names.nodes:
        if isinstance(node, ast.Call) and _sized_by_default(node) and (how := _long_lived(module, node)):
            name = _name_of(node.func)
            default = "min(32, CPUs + 4) threads" if name == "ThreadPoolExecutor" else "one process per CPU"
            yield "LK15", node, (
                f"{name}() without a size ({how}) takes {default}, counted from the host's CPUs "
                "(os.cpu_count(); on Python 3.13 os.process_cpu_count(), which sees the affinity), never from the "
                "container's CPU quota: a pod limited to 2 CPUs on a 64-core node gets a pool sized for 64; give it a "
                "size counted from the quota")


def check(names: Names):
    """LK15's findings in one module."""
    counts = bool(names.identifiers & {"cpu_count", "process_cpu_count", "sched_getaffinity"})
    pools = bool(names.identifiers & {"ThreadPoolExecutor", "ProcessPoolExecutor", "Pool"})
    if counts or pools:
        module = _Module(names)
        if counts:
            yield from _host_counts(module)
        if pools:
            yield from _default_sized_pools(module)
