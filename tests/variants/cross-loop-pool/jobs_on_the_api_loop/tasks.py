"""Background jobs. Plain functions, as Celery tasks are: a broker or the inline runner calls them."""
from sqlalchemy import text

from . import db, jobs


def refresh_totals(customer: str) -> int:
    """Recompute one customer's total from their orders; the new total."""
    return jobs.run_async(_refresh_totals(customer))


async def _refresh_totals(customer: str) -> int:
    async with db.session() as s:
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
