"""Background jobs inside the web process: submit() returns at once, the job runs as a task."""
import asyncio
import logging

log = logging.getLogger(__name__)
_tasks: set[asyncio.Task] = set()


async def _execute(fn, payload):
    try:
        return fn(payload)  # expect: LK12
    except Exception:
        log.exception("job %s failed", fn.__name__)


def submit(fn, payload) -> None:
    task = asyncio.get_running_loop().create_task(_execute(fn, payload))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)
