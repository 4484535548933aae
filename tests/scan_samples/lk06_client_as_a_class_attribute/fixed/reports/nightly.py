"""The nightly job: each run opens its engine on its own loop and disposes of it before the loop ends."""
import asyncio

from sqlalchemy.ext.asyncio import create_async_engine

from .repository import ReportRepository


async def rebuild_day(day: str) -> list:
    engine = create_async_engine("postgresql+asyncpg://reports@db/reports", pool_size=5)
    try:
        return await ReportRepository(engine).rows(day)
    finally:
        await engine.dispose()


def rebuild(days: list[str]) -> None:
    for day in days:
        asyncio.run(rebuild_day(day))
