"""The API's request handlers. They run on the API's event loop."""
from sqlalchemy import text

from . import db


async def place_order(customer: str, cents: int) -> int:
    """Record an order; its id."""
    async with db.session() as s:
        result = await s.execute(
            text("INSERT INTO orders (customer, cents) VALUES (:customer, :cents) RETURNING id"),
            {"customer": customer, "cents": cents},
        )
        return result.scalar_one()


async def customer_total(customer: str) -> int | None:
    """What the customer has spent, as of the last refresh_totals job (None before the first)."""
    async with db.session() as s:
        result = await s.execute(text("SELECT cents FROM totals WHERE customer = :customer"), {"customer": customer})
        return result.scalar_one_or_none()
