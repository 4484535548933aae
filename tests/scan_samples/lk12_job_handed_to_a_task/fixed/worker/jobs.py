"""Jobs: plain functions, so the cron script can run them too."""
import asyncio

import asyncpg


async def _refresh(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("REFRESH MATERIALIZED VIEW daily_sales")
    finally:
        await conn.close()


def refresh_views(payload: dict) -> None:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_refresh(payload["dsn"]))
    finally:
        loop.close()
