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

Your task: when a step fails, whoever is on call must be able to tell why from
the log alone. Log every failed step exactly once, at ERROR, on this module's
logger, naming the step, with the step's own exception attached to the log
record, so that its message and its traceback (down to the line inside the
step that raised it) reach every handler: a terminal, a JSON formatter, an
error tracker. A step that ends with a CancelledError of its own (the request
it waits on was cancelled, say) has failed too. Every other step's output must
still be returned, and the failed steps named in "failed". When the invocation
runs out of time, handler raises TimeoutError, as it does now: the steps that
had already failed by then are still logged, and no step is logged as failed
because of the deadline. Lambda calls handler again and again in the same
process (a warm container): each invocation must behave as the first. Keep
`handler(event, context)` and the shapes of its event and of its answer: the
tests call it.
Run `loopkata check swallowed-traceback` to grade your fix.
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
    return asyncio.run(asyncio.wait_for(handle(event), seconds))
