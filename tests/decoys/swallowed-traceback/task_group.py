"""Decoy: replace the gather with an asyncio.TaskGroup, and log each failed task with its exception.

Each failure is logged with its traceback. But a TaskGroup cancels every
other task of the group as soon as one fails: the steps still running when
the first step failed never finish, and their outputs are lost. That is the
opposite of what return_exceptions=True was there for.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps in a task group: step name -> output, or the exception it raised."""
    tasks = {}
    try:
        async with asyncio.TaskGroup() as group:
            for name, step in layer.items():
                tasks[name] = group.create_task(step())
    except* Exception:
        pass  # every failure is logged below, with its step's name
    outcomes = {}
    for name, task in tasks.items():
        if task.cancelled():
            continue  # cancelled by the group when another step failed: no output
        exc = task.exception()
        if exc is not None:
            log.error("step %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
        outcomes[name] = exc if exc is not None else task.result()
    return outcomes


async def run_workflow(layers: list) -> dict:
    """Run the layers one after another: step name -> output, or the exception it raised."""
    outcomes = {}
    for layer in layers:
        outcomes.update(await run_layer(layer))
    return outcomes


def summarize(outcomes: dict) -> dict:
    """The invocation's answer: the outputs, and the names of the steps that failed (already logged)."""
    outputs, failed = {}, []
    for name, outcome in outcomes.items():
        if isinstance(outcome, BaseException):
            failed.append(name)
        else:
            outputs[name] = outcome
    return {"outputs": outputs, "failed": failed}


async def handle(event: dict) -> dict:
    return summarize(await run_workflow(event["layers"]))


def handler(event: dict, context=None) -> dict:
    """Entry point: event = {"layers": [{name: step, ...}, ...]}; answers {"outputs": {...}, "failed": [...]}."""
    seconds = None
    if context is not None:
        seconds = max(context.get_remaining_time_in_millis() / 1000 - SAFETY_MARGIN, 0)
    return asyncio.run(asyncio.wait_for(handle(event), seconds))
