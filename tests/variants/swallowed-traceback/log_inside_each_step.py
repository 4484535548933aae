"""Variant: each step logs its own failure with log.exception(), inside the except block where it is raised.

There the exception is being handled, so log.exception() finds it and the
record carries the traceback. The step raises it on, so the gather still
hands it back as the step's result, and the runner only counts it: the old
log line after the gather is gone, so each failure is logged once, as it
happens. A CancelledError is logged only when it is the step's own (the
request it waited on was cancelled); when the deadline cancels the layer's
task, its cancelling() says so and it passes through, unlogged.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step, layer: asyncio.Task):
    """One step; a failure is logged here, where its exception is being handled, then raised on."""
    try:
        return await step()
    except asyncio.CancelledError:
        if not layer.cancelling():  # the step's own: the deadline cancels the layer's task
            log.exception("step %s failed", name)
        raise
    except Exception:
        log.exception("step %s failed", name)
        raise


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    me = asyncio.current_task()
    outcomes = await asyncio.gather(*(run_step(name, layer[name], me) for name in names), return_exceptions=True)
    return dict(zip(names, outcomes))


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
