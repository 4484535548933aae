"""LK09: a timeout around one step of an async generator, in a loop that sends something on timeout.

`asyncio.wait_for(anext(gen), t)` (or `async with asyncio.timeout(t): await anext(gen)`)
cancels the step when the time is up, and a cancelled step closes the generator: the next
`anext` ends the stream as if it were complete, in the middle of its work. The keepalive
that the `except TimeoutError` sends is then the last thing the client gets.
"""
from __future__ import annotations

import ast

from .python_rules import Names

STEPS = {"__anext__", "asend", "athrow"}  # gen.__anext__(), gen.asend(x): one step of an async generator
TIMEOUTS = {"timeout", "timeout_at"}
_LOOPS = (ast.While, ast.For, ast.AsyncFor)
_SENDS = {"send", "write", "put", "put_nowait", "send_text", "send_bytes", "send_json", "sendall", "emit"}


def _step(node) -> str | None:
    """'anext(events)' when `node` runs one step of an async generator."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Name) and node.func.id == "anext" and node.args:
            return ast.unparse(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr in STEPS:
            return ast.unparse(node)
    return None


def _timed_step(body: list[ast.stmt], names: Names) -> tuple[ast.AST, str, str] | None:
    """(node, step, how) for a step of an async generator run under a timeout in `body`."""
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and names.is_call_to(node, "asyncio", {"wait_for"}) and node.args \
                    and _step(node.args[0]):
                return node, _step(node.args[0]), "asyncio.wait_for"
            if isinstance(node, ast.AsyncWith) and any(
                    isinstance(i.context_expr, ast.Call) and names.is_call_to(i.context_expr, "asyncio", TIMEOUTS)
                    for i in node.items):
                for inner in (n for b in node.body for n in ast.walk(b)):
                    if isinstance(inner, ast.Await) and _step(inner.value):
                        return node, _step(inner.value), "asyncio.timeout"
    return None


def _catches_timeout(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(k is not None and ast.unparse(k).split(".")[-1] == "TimeoutError" for k in kinds)


def _sends(handler: ast.ExceptHandler) -> bool:
    """Does the handler send something: yield it, or write it to a stream?"""
    for node in (n for b in handler.body for n in ast.walk(b)):
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _SENDS:
            return True
    return False


def check(names: Names):
    """LK09's findings in one module."""
    if not names.identifiers & (STEPS | {"anext"}):
        return
    for loop in (n for n in names.nodes if isinstance(n, _LOOPS)):
        for node in (n for b in loop.body for n in ast.walk(b)):
            if not isinstance(node, ast.Try):
                continue
            timed = _timed_step(node.body, names)
            if timed and any(_catches_timeout(h) and _sends(h) for h in node.handlers):
                where, step, how = timed
                yield "LK09", where, (
                    f"{how} around `{step}` cancels that step when the time is up, and a cancelled step closes "
                    "the async generator: after the keepalive sent on timeout, the next step ends the stream as if "
                    "it were complete; keep the step running across keepalives (a task, asyncio.wait with a "
                    "timeout) instead of cancelling it")
