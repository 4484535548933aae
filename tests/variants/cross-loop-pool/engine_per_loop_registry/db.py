"""Database access: one async engine per event loop."""
import asyncio
import os
import weakref
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine


def database_url() -> str:
    url = os.environ.get("DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/orders")
    return url.replace("postgresql://", "postgresql+asyncpg://", 1)


_engines: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, object]" = weakref.WeakKeyDictionary()


def get_engine():
    """The running loop's engine, made on its first use."""
    loop = asyncio.get_running_loop()
    if loop not in _engines:
        _engines[loop] = create_async_engine(database_url(), pool_size=5, max_overflow=5)
    return _engines[loop]


async def dispose_loop_engine() -> None:
    """Close the running loop's engine and its connections; call before the loop ends."""
    engine = _engines.pop(asyncio.get_running_loop(), None)
    if engine is not None:
        await engine.dispose()


@asynccontextmanager
async def session():
    async with AsyncSession(get_engine(), expire_on_commit=False) as s, s.begin():
        yield s
