"""Decoy: every failure logged with its exception attached, but only in summarize(), once every layer is done.

Each record is right: ERROR, the module's own logger, the step named, the
exception attached (exc_info=outcome), so the message and the traceback down
to the line inside the step are there. But summarize() runs only when the
whole workflow has finished. When a later layer runs out of time, wait_for()
cancels the invocation, handler raises TimeoutError, and summarize() never
runs: the steps that failed in the earlier layers, seconds before, are in no
log. The timed-out invocation is the one an on-call engineer reads first, and
its log says nothing of the failures that may have caused the delay.
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
        outcomes.update(await run_layer(layer))
    return outcomes


def summarize(outcomes: dict) -> dict:
    """The invocation's answer: the outputs, and the names of the steps that failed."""
    outputs, failed = {}, []
    for name, outcome in outcomes.items():
        if isinstance(outcome, BaseException):
            # gather(..., return_exceptions=True) handed the exception back as a value:
            # no `except` block is running here, so log.exception() would find no
            # exception to log (it prints "NoneType: None"). Attach the exception
            # itself: the record then carries its message and its traceback, and
            # exc.__traceback__ still holds the frames inside the step, down to the
            # line that raised.
            log.error("step %s failed: %s: %s", name, type(outcome).__name__, outcome, exc_info=outcome)
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
