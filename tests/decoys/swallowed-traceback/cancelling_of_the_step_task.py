"""Decoy: a step's CancelledError counted as the deadline's when the task running the step is being cancelled.

Each step runs in a wrapper that tells the deadline from a step's own
cancellation by asking asyncio.current_task().cancelling(). That is the
wrong task: it is the task running the step, and a step that cancels the
task it runs in (asyncio.current_task().cancel(), as a client library
giving up does) makes it look cancelled from outside. The step is named in
"failed" and never logged. The deadline cancels the task running the layer:
ask that one.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_step(name: str, step) -> object:
    """Run one step: its output, or the exception it raised, logged with its traceback as it happens.

    The record is written inside the except block, the moment the step fails, so
    a failure is logged even when a deadline later cuts the invocation short. A
    CancelledError of the step's own is a failure; the cancellation of this task
    from outside (the invocation's deadline) is not: it is let through.
    """
    try:
        return await step()
    except asyncio.CancelledError as exc:
        if asyncio.current_task().cancelling():
            raise  # the deadline (or whoever cancelled the invocation), not the step
        log.error("step %s failed: %s", name, exc or "cancelled", exc_info=exc)
        return exc
    except Exception as exc:
        log.error("step %s failed: %s", name, exc, exc_info=exc)
        return exc


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output, or the exception it raised."""
    names = list(layer)
    outcomes = await asyncio.gather(*(run_step(name, layer[name]) for name in names), return_exceptions=True)
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
        if isinstance(outcome, BaseException):  # logged by run_step when it happened
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
