"""Decoy: format the traceback with traceback.format_exception() and write it into the message.

A terminal shows the same text as a record that carries the exception. But
this record carries none (exc_info is empty): a handler that reads exc_info
gets a plain message, so an error tracker files no exception and no stack, a
JSON formatter puts no exception field, and the traceback is text that
anything may cut at its first newline.
"""
import asyncio
import logging
import traceback

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
            trace = "".join(traceback.format_exception(outcome))
            log.error("step %s failed:\n%s", name, trace.rstrip())
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
