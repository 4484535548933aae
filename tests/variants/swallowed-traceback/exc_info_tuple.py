"""Variant: after the gather, log each failure with the classic exc_info triple (type, value, traceback).

This is what sys.exc_info() would have returned inside an except block, built
by hand from the value gather handed back: its traceback is still on
exc.__traceback__. The record carries the exception exactly as exc_info=exc
would.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    outcomes = await asyncio.gather(*(layer[name]() for name in names), return_exceptions=True)
    for name, outcome in zip(names, outcomes):
        if isinstance(outcome, BaseException):  # logged now: a later layer may run out of time
            log.error("step %s failed", name, exc_info=(type(outcome), outcome, outcome.__traceback__))
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
