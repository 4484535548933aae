"""Reports service: an API that builds customer reports as background jobs.

`app.py` is the FastAPI app: `POST /reports` starts a report job and answers
with its job id, `GET /jobs/{job_id}` tells how the job is doing, `GET /health`
is the liveness probe's endpoint. `tasks.py` holds the jobs: plain functions,
as Celery tasks are, so a worker process can run them too. A job fetches the
customer's orders with an async client (`jobs.run_async()` gives it an event
loop with `asyncio.run()`), then stores the report through the storage API's
synchronous client. `jobs.py` is the inline job runner: on this plan there is
no worker process, so jobs run inside the API process.

Every test passed: they call each job directly, from plain test functions,
and test the runner with jobs that never touch asyncio. In production every
report job failed at once, and the API has never produced a report.

Your task, in `jobs.py` (the API in `app.py` and the jobs in `tasks.py` are
fine: leave `tasks.py` as it is, a worker process runs it unchanged):
- a job dispatched from `POST /reports` finishes with its report, and one
  that fails is marked failed with its error, its traceback in the log;
- `POST /reports` answers with the job id while the job still runs, and
  `GET /health` answers while jobs run;
- jobs started at the same time run at the same time, up to the width of
  the thread pool that runs them (asyncio.to_thread's default executor has
  min(32, cores + 4) threads), and each finishes as soon as its own work is
  done; a job past that width waits for a free thread, and `GET /jobs/{id}`
  knows it ("queued") from the moment its id is returned;
- the app's shutdown (`jobs.drain()`) waits for every job still running, for
  as long as it runs (no deadline of its own: the platform's grace period
  decides that), without blocking the event loop meanwhile; a job that fails
  meanwhile does not end the wait, and once ended, failed or done, it is not
  waited for; and the runner lets go of each job once it has ended.

The hidden tests serve `app.create_app(warehouse_url)` with uvicorn on
127.0.0.1 (its lifespan included) against a stand-in for the warehouse's HTTP
API, call `jobs.dispatch(tasks.build_report, warehouse_url, customer)` from a
running event loop, and read `jobs.status(job_id)` and the logger
`reports.jobs`: keep those names and signatures, and the JSON shapes.

Run `loopkata check nested-run` to grade your fix.
"""
