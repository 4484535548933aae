"""Invoice runs, started by cron: one asyncio.run each, with its own engine."""
import asyncio

from sqlalchemy import text

from billing.db import make_engine


async def close_month(month: str) -> None:
    engine = make_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(text("update invoices set closed = true where month = :m"), {"m": month})
    finally:
        await engine.dispose()


def main(months: list[str]) -> None:
    for month in months:
        asyncio.run(close_month(month))
