"""Workflow runner of the document-extraction service, run as a Lambda-style function.

A workflow is a list of layers, and a layer maps step names to steps. The
steps of one layer run at the same time (OCR, a vision model and a table
parser on the same receipt, say); a layer starts when the one before it has
finished. A step is an async callable that returns the step's output.

A failed step must not stop the others, so a layer gathers its steps with
`return_exceptions=True`: a step that raises hands back its exception as its
result, next to the other steps' outputs.

`handler(event, context)` is the function entry point. Each call runs one
`asyncio.run(...)`: one invocation, cut short with TimeoutError when the time
Lambda has left (`context.get_remaining_time_in_millis()`, less a safety
margin) runs out. It returns every output it got and the names of the steps
that failed.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step, layer: asyncio.Task):
    """One step: its output, or the exception it ended with, logged the moment it fails.

    Logged here, not after the gather: when the deadline falls while a layer runs, the
    gather never returns, and a step that failed a moment before must be in the log all
    the same. `layer` is the task running the layer: while the deadline cancels it, its
    cancelling() count is above zero, and a step's CancelledError is the deadline's doing."""
    # Inside the except block the step's exception is the one being handled, so log.exception()
    # attaches it: the record carries its message and its traceback, down to the line inside the
    # step that raised, whichever handler reads it.
    try:
        return await step()
    except asyncio.CancelledError as exc:
        if layer.cancelling():
            raise
        # the step's own (the request it waited on was cancelled): a failure like any other
        log.exception("step %s failed: %s: %s", name, type(exc).__name__, exc)
        return exc
    except Exception as exc:
        log.exception("step %s failed: %s: %s", name, type(exc).__name__, exc)
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names, here = list(layer), asyncio.current_task()
    outcomes = await asyncio.gather(*(run_step(name, layer[name], here) for name in names), return_exceptions=True)
    return dict(zip(names, outcomes))


async def run_workflow(layers: list) -> dict:
    """Run the layers one after another: step name -> output, or the exception it raised."""
    outcomes = {}
    for layer in layers:
        outcomes.update(await run_layer(layer))
    return outcomes


def summarize(outcomes: dict) -> dict:
    """The invocation's answer: the outputs, and the names of the steps that failed (each logged by run_step)."""
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
