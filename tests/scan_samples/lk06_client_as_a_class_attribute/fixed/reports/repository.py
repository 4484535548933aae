"""Reads report rows with the engine of the run that asks."""
from sqlalchemy import text


class ReportRepository:
    def __init__(self, engine):
        self.engine = engine

    async def rows(self, day: str) -> list:
        async with self.engine.connect() as conn:
            result = await conn.execute(text("select * from reports where day = :day"), {"day": day})
            return list(result)
