"""Background jobs. Plain functions, as Celery tasks are: a broker or the inline runner calls them."""
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from . import db, jobs


def refresh_totals(customer: str) -> int:
    """Recompute one customer's total from their orders; the new total."""
    engine = create_async_engine(db.database_url())     # this job's own engine
    try:
        return jobs.run_async(_refresh_totals(engine, customer))
    finally:
        jobs.run_async(engine.dispose())                 # always close what the job opened


async def _refresh_totals(engine, customer: str) -> int:
    async with AsyncSession(engine, expire_on_commit=False) as s, s.begin():
        result = await s.execute(
            text(
                "INSERT INTO totals (customer, cents, orders) "
                "SELECT :customer, COALESCE(SUM(cents), 0), COUNT(*) FROM orders WHERE customer = :customer "
                "ON CONFLICT (customer) DO UPDATE SET cents = EXCLUDED.cents, orders = EXCLUDED.orders "
                "RETURNING cents"
            ),
            {"customer": customer},
        )
        return result.scalar_one()
