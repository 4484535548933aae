"""Variant: as each layer ends, raise each failed outcome again inside a try, and log it with log.exception().

Raising the exception the gather handed back makes it the exception being
handled, so log.exception() in the except block finds it and the record
carries it, traceback and all (the raise adds run_workflow's own frame to it,
in front of the step's). It happens after each layer, not in summarize(): a
later layer that runs out of time ends the invocation before summarize()
runs. Catching BaseException is harmless here: the loop only ever sees what
the gather returned, and a deadline cancels the gather itself, which raises.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    outcomes = await asyncio.gather(*(layer[name]() for name in names), return_exceptions=True)
    return dict(zip(names, outcomes))


async def run_workflow(layers: list) -> dict:
    """Run the layers one after another: step name -> output, or the exception it raised."""
    outcomes = {}
    for layer in layers:
        done = await run_layer(layer)
        for name, outcome in done.items():
            try:
                if isinstance(outcome, BaseException):
                    raise outcome
            except BaseException:
                log.exception("step %s failed", name)
        outcomes.update(done)
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
