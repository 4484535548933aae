"""The inline job runner: background jobs inside the API process, when there is no worker.

`dispatch()` is called from a request handler, on the API's event loop. It
returns a job id at once and runs the job on a worker thread: a job is a plain
function that may call `run_async()`, and asyncio.run() refuses to start in a
thread whose event loop is already running, which the API's always is. A
worker thread has no event loop, so there it may start one of its own.
"""
import asyncio
import logging
import uuid

log = logging.getLogger("reports.jobs")

_running: set[asyncio.Task] = set()  # strong references: the loop holds tasks weakly
_status: dict[str, dict] = {}


def run_async(coro):
    """Run a coroutine to completion from a synchronous job."""
    return asyncio.run(coro)


def _run_inline(task, args, job_id: str) -> None:
    # Runs on a worker thread: no event loop is running here, so the job's own
    # asyncio.run() may start one, and its blocking calls hold this thread only.
    _status[job_id] = {"state": "running"}
    try:
        result = task(*args)
    except Exception as exc:
        log.exception("job %s (%s) failed", job_id, task.__name__)
        _status[job_id] = {"state": "failed", "error": f"{type(exc).__name__}: {exc}"}
    else:
        _status[job_id] = {"state": "done", "result": result}


def dispatch(task, *args) -> str:
    """Start `task(*args)` in the background; its job id. Call it on the API's event loop."""
    job_id = str(uuid.uuid4())
    _status[job_id] = {"state": "queued"}
    handle = asyncio.create_task(asyncio.to_thread(_run_inline, task, args, job_id))
    _running.add(handle)
    handle.add_done_callback(_running.discard)
    return job_id


async def drain() -> None:
    """Wait for the jobs still running, a second at most (the app's shutdown calls it)."""
    if _running:
        await asyncio.wait(set(_running), timeout=1.0)  # a deploy must not hang on a stuck job


def status(job_id: str) -> dict:
    """{"state": "queued" | "running" | "done" | "failed", plus "result" or "error"}."""
    return dict(_status.get(job_id, {"state": "unknown"}))
