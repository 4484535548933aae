"""Reads report rows; the engine is kept on the class so that every repository shares its pool."""
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine


class ReportRepository:
    engine = create_async_engine("postgresql+asyncpg://reports@db/reports", pool_size=5)  # expect: LK06

    async def rows(self, day: str) -> list:
        async with self.engine.connect() as conn:
            result = await conn.execute(text("select * from reports where day = :day"), {"day": day})
            return list(result)
