"""The inline job runner: background jobs inside the API process, when there is no worker.

`dispatch()` is called from a request handler, on the API's event loop. It
returns a job id at once and runs the job in a worker thread: a job is a plain
function that may call `run_async()`, and asyncio.run() refuses to start in a
thread whose event loop is already running, which the API's always is.
"""
import asyncio
import logging
import uuid

log = logging.getLogger("orders.jobs")

_running: set[asyncio.Task] = set()  # strong references: the loop holds tasks weakly
_status: dict[str, dict] = {}
# Seconds a job's coroutine may run: past it, it is cancelled (its transaction rolled back), and the job fails.
JOB_TIMEOUT = 60.0


def run_async(coro):
    """Run a coroutine to completion from a synchronous job; cancelled once it has run JOB_TIMEOUT seconds."""
    return asyncio.run(asyncio.wait_for(coro, JOB_TIMEOUT))


def _run_inline(task, args, job_id: str) -> None:
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


def status(job_id: str) -> dict:
    """{"state": "queued" | "running" | "done" | "failed", plus "result" or "error"}."""
    return dict(_status.get(job_id, {"state": "unknown"}))
