"""Invoice runs, started by cron: one asyncio.run each."""
import asyncio

from sqlalchemy import text

from billing.db import engine


async def close_month(month: str) -> None:
    async with engine.begin() as conn:
        await conn.execute(text("update invoices set closed = true where month = :m"), {"m": month})


def main(months: list[str]) -> None:
    for month in months:
        asyncio.run(close_month(month))
