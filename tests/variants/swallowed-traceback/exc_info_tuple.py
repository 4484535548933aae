"""Variant: each step's failure logged where it happens, with the classic exc_info triple (type, value, traceback).

This is what sys.exc_info() returns inside the except block, written out by
hand: the record carries the exception exactly as exc_info=exc would. Each
step runs in a wrapper that logs its failure at once, so a failure is logged
even when the deadline later cancels the gather of its layer. A CancelledError
is the step's own unless the task running the layer is being cancelled (its
cancelling() count is above zero): then the deadline is passed on, unlogged.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def guarded(name: str, step, layer: asyncio.Task):
    """A step's output, or the exception it ended with, logged as it happens."""
    try:
        return await step()
    except (Exception, asyncio.CancelledError) as exc:
        if isinstance(exc, asyncio.CancelledError) and layer.cancelling():
            raise  # the deadline, cancelling the invocation
        log.error("step %s failed", name, exc_info=(type(exc), exc, exc.__traceback__))
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    me = asyncio.current_task()
    outcomes = await asyncio.gather(*(guarded(name, layer[name], me) for name in names), return_exceptions=True)
    return dict(zip(names, outcomes))


async def run_workflow(layers: list) -> dict:
    """Run the layers one after another: step name -> output, or the exception it raised."""
    outcomes = {}
    for layer in layers:
        outcomes.update(await run_layer(layer))
    return outcomes


def summarize(outcomes: dict) -> dict:
    """The invocation's answer: the outputs, and the names of the steps that failed."""
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
