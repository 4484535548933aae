"""The billing database: an engine for the run that asks, disposed of by it."""
from sqlalchemy.ext.asyncio import create_async_engine

URL = "postgresql+asyncpg://billing@db/billing"


def make_engine():
    return create_async_engine(URL)
