"""Decoy: hand each job to Celery with task_always_eager = True, since there is no worker: eager mode runs it in the caller's thread, the API's event loop thread.

Eager mode exists for tests: `delay()` calls the task at once, in the thread
that called `delay()`, and returns when it has finished. Called from the
endpoint, that thread is the one running the API's event loop, so the job's
asyncio.run() raises the same RuntimeError as before; and a job that did not
end in asyncio.run() would hold the loop, every request waiting, for the job's
whole duration.
"""
