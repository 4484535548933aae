"""Background jobs. Plain functions, as Celery tasks are: a broker or the inline runner calls them."""
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from . import db, jobs


def refresh_totals(customer: str) -> int:
    """Recompute one customer's total from their orders; the new total."""
    return jobs.run_async(_refresh_totals(customer))


async def _refresh_totals(customer: str) -> int:
    engine = create_async_engine(db.database_url())  # this job's own pool, on this job's own loop
    async with AsyncSession(engine) as s, s.begin():
        result = await s.execute(
            text(
                "INSERT INTO totals (customer, cents, orders) "
                "SELECT :customer, COALESCE(SUM(cents), 0), COUNT(*) FROM orders WHERE customer = :customer "
                "ON CONFLICT (customer) DO UPDATE SET cents = EXCLUDED.cents, orders = EXCLUDED.orders "
                "RETURNING cents"
            ),
            {"customer": customer},
        )
        total = result.scalar_one()
    await engine.dispose()  # close the job's connection before its loop ends
    return total
