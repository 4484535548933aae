"""Database access: one async engine for the API, and one per job.

Opening a PostgreSQL connection costs a TCP handshake, authentication and a
new server process, so the API's engine keeps up to five open and lends them
out. A pooled asyncpg connection belongs to the event loop that opened it, so
only the API's loop may use that pool: jobs run on loops of their own.
"""
import os
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool


def database_url() -> str:
    """The SQLAlchemy URL of the orders database (asyncpg driver)."""
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/orders")
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


engine = create_async_engine(database_url(), pool_size=5, max_overflow=5)  # pragma: no mutate (demo sizes)
Session = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def session():
    """A session in a transaction: committed if the block succeeds, rolled back if it raises."""
    async with Session() as s, s.begin():
        yield s


@asynccontextmanager
async def worker_session():
    """A session for a job, on an engine of its own that keeps nothing between jobs.

    NullPool opens each connection on the loop that asks for it and closes it
    when it is given back; disposing the engine before the job's loop ends
    leaves nothing bound to that loop behind.
    """
    job_engine = create_async_engine(database_url(), poolclass=NullPool)
    try:
        async with AsyncSession(job_engine, expire_on_commit=False) as s, s.begin():
            yield s
    finally:
        await job_engine.dispose()
