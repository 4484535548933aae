"""Database access: one async engine for the API, and one for the jobs.

Opening a PostgreSQL connection costs a TCP handshake, authentication and a
new server process, so the API's engine keeps up to five open and lends them
out. A pooled asyncpg connection belongs to the event loop that opened it, so
only the API's loop may use that pool: jobs run on loops of their own.
"""
import os
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine


def database_url() -> str:
    """The SQLAlchemy URL of the orders database (asyncpg driver)."""
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/orders")
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


engine = create_async_engine(database_url(), pool_size=5, max_overflow=5)
Session = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def session():
    """A session in a transaction: committed if the block succeeds, rolled back if it raises."""
    async with Session() as s, s.begin():
        yield s


_job_engine = None


def job_engine():
    """The jobs' engine, made on first use: the API's pool stays the API's."""
    global _job_engine
    if _job_engine is None:
        _job_engine = create_async_engine(database_url(), pool_size=5, max_overflow=5)
    return _job_engine


@asynccontextmanager
async def worker_session():
    """A session for a job; the jobs' pool is emptied when the job ends, before its loop closes."""
    engine = job_engine()
    try:
        async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
            yield s
    finally:
        await engine.dispose()  # nothing of this job's loop stays in the pool
