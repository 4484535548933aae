"""Orders service: an async API and inline background jobs, sharing one database engine.

The API (`service.py`) answers requests on its event loop through SQLAlchemy's
async engine (asyncpg driver), whose connection pool keeps a few PostgreSQL
connections open between requests. Background jobs (`tasks.py`) are plain
functions, as Celery tasks are; on a plan with no worker process they run
inline: `jobs.dispatch()` hands each one to a worker thread, where
`jobs.run_async()` gives it an event loop of its own with `asyncio.run()`.

Every test passed: the tests run the API and the jobs on one loop, one at a
time. In production the first job failed with "got Future ... attached to a
different loop", every job after it with "another operation is in progress",
and once in a while the whole process died.

Your task, in `db.py`, `jobs.py` and `tasks.py` (the API in `service.py` is fine):
- a job succeeds after API requests, and while API requests are in flight,
  twenty times in a row;
- `jobs.dispatch()` still returns at once: the API answers while a job runs;
- jobs leave no connection open behind them, and close what they open
  themselves (not the garbage collector);
- the API keeps reusing its pooled connections: a request must not pay for a
  new connection;
- a job still running `jobs.JOB_TIMEOUT` seconds after it started is
  cancelled and reported failed, and commits nothing, then or later.

The hidden tests set DATABASE_URL to a fresh database (the tables exist), as a
plain `postgresql://user@host:port/database` URL, as production does; then
call `service.place_order(customer, cents)` and `service.customer_total(customer)`
on the API's event loop, `jobs.dispatch(tasks.refresh_totals, customer)` from it,
read `jobs.status(job_id)`, and set `jobs.JOB_TIMEOUT` (a short one, in one test):
keep those names and signatures.

Run `loopkata check cross-loop-pool` to grade your fix.
"""
