"""Decoy: each layer's failures logged, exception attached, as soon as the layer's gather returns.

Every record is right, and a failure in one layer is logged before the next
layer starts, so a deadline in a later layer no longer hides it. But the
gather returns only when every step of its layer has ended. When the deadline
falls while a layer runs, wait_for cancels that gather, which raises instead
of returning, and a step of the same layer that failed a moment before the
deadline is never logged: the timed-out invocation's log says nothing of it.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised.

    Each failure is logged as soon as its layer has ended: if a later layer runs out of time,
    the invocation ends with TimeoutError and never reaches summarize(), and these failures
    must be in the log all the same."""
    names = list(layer)
    outcomes = dict(zip(names, await asyncio.gather(*(layer[name]() for name in names), return_exceptions=True)))
    for name, outcome in outcomes.items():
        if isinstance(outcome, BaseException):  # CancelledError too: a step cancelled on its own has failed
            # gather(..., return_exceptions=True) handed the exception back as a value:
            # no `except` block is running here, so log.exception() would find no
            # exception to log (it prints "NoneType: None"). Attach the exception
            # itself: the record then carries its message and its traceback, and
            # exc.__traceback__ still holds the frames inside the step, down to the
            # line that raised.
            log.error("step %s failed: %s: %s", name, type(outcome).__name__, outcome, exc_info=outcome)
    return outcomes


async def run_workflow(layers: list) -> dict:
    """Run the layers one after another: step name -> output, or the exception it raised."""
    outcomes = {}
    for layer in layers:
        outcomes.update(await run_layer(layer))
    return outcomes


def summarize(outcomes: dict) -> dict:
    """The invocation's answer: the outputs, and the names of the steps that failed (logged by run_layer)."""
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
