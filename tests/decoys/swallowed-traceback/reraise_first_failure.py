"""Decoy: after the gather, raise the first failure again, and log.exception() it in the handler.

log.exception() now runs inside an except block, so that one failure is
logged with its whole traceback. But only the first: the other failures of
the layer are never raised and never logged, the record does not say which
step failed, and the invocation answers nothing at all, so the outputs of
every step that succeeded are lost too.
"""
import asyncio
import logging

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation


async def run_layer(layer: dict) -> dict:
    """Run one layer's steps at the same time: step name -> output; the first failure is raised."""
    names = list(layer)
    outcomes = await asyncio.gather(*(layer[name]() for name in names), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome  # let it propagate with its traceback
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
            log.error("step %s failed: %s", name, type(outcome).__name__)
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
    try:
        return asyncio.run(asyncio.wait_for(handle(event), seconds))
    except Exception:
        log.exception("workflow failed")
        raise
