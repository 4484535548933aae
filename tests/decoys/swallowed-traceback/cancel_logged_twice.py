"""Decoy: a step's own CancelledError logged by the step's wrapper, and once more in summarize().

Real failures are logged once, where they happen. But the wrapper logs a
cancelled step and hands it back, and summarize() logs every CancelledError
it finds among the outcomes again, "to be safe": each step whose request was
cancelled shows up twice in the log, and every count of errors is off.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step, stopping: list):
    """Run one step; log its failure (with its own exception) the moment it happens, and hand the failure back."""
    try:
        return await step()
    except (Exception, asyncio.CancelledError) as exc:
        if stopping:  # the layer is being stopped by the deadline: not the step's own failure
            raise
        log.error("step %s failed: %s: %s", name, type(exc).__name__, exc, exc_info=exc)
        if isinstance(exc, asyncio.CancelledError):
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                task.uncancel()
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    if not names:
        return {}
    stopping = []
    tasks = [asyncio.create_task(run_step(name, layer[name], stopping)) for name in names]
    try:
        await asyncio.wait(tasks)
    except asyncio.CancelledError:
        stopping.append(True)
        for task in tasks:
            task.cancel()
        await asyncio.wait(tasks)
        raise
    return {name: task.result() for name, task in zip(names, tasks)}


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
            if isinstance(outcome, asyncio.CancelledError):
                log.error("step %s was cancelled", name, exc_info=outcome)
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
