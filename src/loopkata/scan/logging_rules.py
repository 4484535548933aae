"""LK10: the results of `gather(..., return_exceptions=True)` reported as failures without their traceback.

With `return_exceptions=True` a failed step's exception comes back as a value, outside any
`except` block. Logging its type's name or its text (`log.error("%s failed: %s", name, exc)`)
drops where it was raised; `log.exception(...)` there attaches sys.exc_info(), which is
empty ("NoneType: None"). The record needs `exc_info=exc`.
"""
from __future__ import annotations

import ast

from .python_rules import Names

# a failure reported as one: debug and info lines are notes, whose authors chose to keep them short
LEVELS = {"warning", "warn", "error", "critical", "exception", "log"}
LOUD = ("WARN", "ERROR", "CRITICAL", "FATAL")


def _gathers_exceptions(names: Names) -> bool:
    if "return_exceptions" not in names.identifiers:
        return False
    return any(names.is_call_to(n, "asyncio", {"gather"}) and any(
        k.arg == "return_exceptions" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in n.keywords) for n in names.nodes)


def _exception_check(test) -> str | None:
    """'outcome' for `isinstance(outcome, BaseException)` (or Exception, or a tuple naming one)."""
    if not (isinstance(test, ast.Call) and getattr(test.func, "id", None) == "isinstance" and len(test.args) == 2
            and isinstance(test.args[0], ast.Name)):
        return None
    kinds = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    if any(ast.unparse(k).split(".")[-1] in ("Exception", "BaseException") for k in kinds):
        return test.args[0].id
    return None


def _log_call(node) -> str | None:
    """The level of a logger call (`log.error(...)`, `logger.exception(...)`, `logging.warning(...)`)."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in LEVELS:
        receiver = node.func.value
        spelled = receiver.id if isinstance(receiver, ast.Name) else getattr(receiver, "attr", "")
        if node.func.attr == "log" and not (node.args and ast.unparse(node.args[0]).upper().endswith(LOUD)):
            return None
        if "log" in spelled.lower():
            return node.func.attr
    return None


def _in_except(node, names: Names) -> bool:
    parent = names.parents.get(node)
    while parent is not None and not isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        if isinstance(parent, ast.ExceptHandler):
            return True
        parent = names.parents.get(parent)
    return False


def check(names: Names):
    """LK10's findings in one module: it gathers with return_exceptions=True, and a branch that
    knows a value is an exception logs it without attaching it."""
    if not _gathers_exceptions(names):
        return
    for branch in (n for n in names.nodes if isinstance(n, ast.If)):
        held = _exception_check(branch.test)
        if not held:
            continue
        for node in (n for b in branch.body for n in ast.walk(b)):
            level = _log_call(node)
            if not level or any(k.arg == "exc_info" for k in node.keywords):
                continue
            if level == "exception" and not _in_except(node, names):
                yield "LK10", node, (
                    f"log.exception() outside an except block attaches sys.exc_info(), which is empty here: the "
                    f"record says 'NoneType: None' where the traceback of `{held}` should be; pass exc_info={held}")
            elif level != "exception":
                yield "LK10", node, (
                    f"`{held}` is an exception that gather(..., return_exceptions=True) handed back as a value, "
                    f"and this line logs it without it (no exc_info): its traceback, the line inside the step "
                    f"that raised, never reaches the log; pass exc_info={held}")
