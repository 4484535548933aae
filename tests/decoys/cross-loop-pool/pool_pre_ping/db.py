"""Database access: one async engine for the process, and its connection pool.

Opening a PostgreSQL connection costs a TCP handshake, authentication and a
new server process, so the engine keeps up to five open and lends them out.
"""
import os
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine


def database_url() -> str:
    """The SQLAlchemy URL of the orders database (asyncpg driver)."""
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/orders")
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


engine = create_async_engine(database_url(), pool_size=5, max_overflow=5, pool_pre_ping=True)
Session = async_sessionmaker(engine, class_=AsyncSession, expire_on_commit=False)


@asynccontextmanager
async def session():
    """A session in a transaction: committed if the block succeeds, rolled back if it raises."""
    async with Session() as s, s.begin():
        yield s
