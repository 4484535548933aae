"""Variant: an asyncio.TaskGroup whose steps catch and log their own failures, so that none escapes.

A TaskGroup cancels the other tasks when one of them raises. Here no step
raises: each catches Exception, and a CancelledError of its own, logs it
inside its except block with log.exception(), and returns it as its outcome.
The group then only waits for every step. A cancellation of the invocation
(the layer task's cancelling() is then non-zero; a step that cancels its own task does not count) is passed on: it still cancels the group
and propagates.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step, layer: asyncio.Task):
    """One step; a failure is logged here, where its exception is being handled, and becomes the outcome."""
    try:
        return await step()
    except asyncio.CancelledError as exc:
        if layer.cancelling():  # the deadline cancelling the layer (and so the group): pass it on
            raise
        log.exception("step %s failed", name)  # the step's own: it has failed
        return exc
    except Exception as exc:
        log.exception("step %s failed", name)
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps in a task group: step name -> output, or the exception it raised."""
    async with asyncio.TaskGroup() as group:
        tasks = {name: group.create_task(run_step(name, step, asyncio.current_task())) for name, step in layer.items()}
    return {name: task.result() for name, task in tasks.items()}


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
