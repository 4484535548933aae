"""Background jobs. Plain functions, as Celery tasks are: a broker or the inline runner calls them."""
import os

import asyncpg

from . import jobs


def refresh_totals(customer: str) -> int:
    """Recompute one customer's total from their orders; the new total."""
    return jobs.run_async(_refresh_totals(customer))


async def _refresh_totals(customer: str) -> int:
    conn = await asyncpg.connect(os.environ["DATABASE_URL"])  # on this job's loop, and only for this job
    try:
        return await conn.fetchval(
            "INSERT INTO totals (customer, cents, orders) "
            "SELECT $1, COALESCE(SUM(cents), 0), COUNT(*) FROM orders WHERE customer = $1 "
            "ON CONFLICT (customer) DO UPDATE SET cents = EXCLUDED.cents, orders = EXCLUDED.orders "
            "RETURNING cents",
            customer,
        )
    finally:
        await conn.close()
