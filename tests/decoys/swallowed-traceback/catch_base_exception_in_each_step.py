"""Decoy: wrap each step in try/except BaseException and log.exception() the failure there.

Inside the except block log.exception() has the exception, so a real failure
is logged with its traceback. But BaseException also catches CancelledError:
when the invocation runs out of time and the deadline cancels the steps still
running, every one of them is logged as a failed step, with a CancelledError
traceback, although none of them failed.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step):
    """One step; a failure is logged here, where its exception is being handled, and becomes the outcome."""
    try:
        return await step()
    except BaseException as exc:
        log.exception("step %s failed", name)
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    outcomes = await asyncio.gather(*(run_step(name, layer[name]) for name in names))
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
