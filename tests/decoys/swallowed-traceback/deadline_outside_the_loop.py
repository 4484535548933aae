"""Decoy: run the invocation on a worker thread and stop waiting for it with future.result(timeout=...).

Each step is wrapped in try/except BaseException with log.exception(), so a
real failure is logged with its traceback; and since the deadline is now
outside the event loop, it cancels nothing, so no step is logged as failed
because of it. handler raises TimeoutError on time. But nothing stops the
invocation: its event loop runs on in the pool thread, its steps finish, fail
and log later, in the middle of whatever the function handles next (on
Lambda, the next invocation), and every timed-out invocation keeps one more
pool thread busy.
"""
import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

log = logging.getLogger(__name__)

SAFETY_MARGIN = 0.5  # seconds kept back to answer before Lambda stops the invocation
_POOL = ThreadPoolExecutor(max_workers=4)  # the threads that run the invocations


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
    # deadline from outside the loop: nothing inside gets cancelled, so no step "fails" on a timeout
    future = _POOL.submit(asyncio.run, handle(event))
    return future.result(timeout=seconds)  # concurrent.futures.TimeoutError is TimeoutError on 3.11+
