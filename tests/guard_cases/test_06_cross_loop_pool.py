"""The orders service (kata 06), tested as its team would: the API places orders, an inline job totals them.

A real PostgreSQL (started by loopkata.services, as the hidden tests start it,
or $DATABASE_URL) holds a fresh database for this run, with the service's two
tables; the service reads DATABASE_URL when it is imported. The API runs on the
test's event loop; jobs.dispatch() runs the job in a worker thread, on a loop of
its own, as production does.
"""
import asyncio
import os
import time

import asyncpg
import pytest

from conftest import load, submodule
from loopkata import services

# The bug: the job runs on a loop of its own (asyncio.run in a worker thread) but takes its connection from
# db.py's module-level engine, whose pooled asyncpg connections belong to the API's loop. The engine is
# made at import, a line no finding can name; the finding names the job's use of it.
BUG = [("tasks.py", "_refresh_totals"), ("db.py", "session")]

SCHEMA = """
CREATE TABLE orders (id serial PRIMARY KEY, customer text NOT NULL, cents integer NOT NULL);
CREATE TABLE totals (customer text PRIMARY KEY, cents bigint NOT NULL, orders integer NOT NULL);
"""


async def admin(dsn, *statements):
    conn = await asyncpg.connect(dsn)
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def database_url():
    server = services.postgres()
    name = f"guard_orders_{os.getpid()}"
    asyncio.run(admin(server.dsn, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    asyncio.run(admin(server.with_database(name), SCHEMA))
    os.environ["DATABASE_URL"] = server.with_database(name)
    yield server.with_database(name)
    asyncio.run(admin(server.dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="module")
def kata(impl, database_url):
    """The service, imported once DATABASE_URL names the test database (db.py reads it at import)."""
    return load(impl)


async def wait_for_job(jobs, job_id, seconds=10):
    deadline = time.monotonic() + seconds
    while (state := jobs.status(job_id))["state"] not in ("done", "failed") and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return state


def test_a_job_totals_the_orders_the_api_placed(kata, request):
    """Two orders through the API, then refresh_totals as an inline job: it succeeds and the API reads the total."""
    service, jobs, tasks = (submodule(kata, name) for name in ("service", "jobs", "tasks"))
    customer = f"ada-{request.node.callspec.id}"

    async def api():
        await service.place_order(customer, 1200)
        await service.place_order(customer, 800)
        state = await wait_for_job(jobs, jobs.dispatch(tasks.refresh_totals, customer))
        assert state == {"state": "done", "result": 2000}
        assert await service.customer_total(customer) == 2000

    asyncio.run(api())
