"""Report jobs. Plain functions, as Celery tasks are: a worker process or the inline runner calls them."""
import httpx

from . import jobs


def build_report(warehouse_url: str, customer: str) -> dict:
    """Total one customer's orders and store the report; the report."""
    orders = jobs.run_async(fetch_orders(warehouse_url, customer))
    report = {"customer": customer, "orders": len(orders), "total_cents": sum(o["cents"] for o in orders)}
    store_report(warehouse_url, report)
    return report


async def fetch_orders(warehouse_url: str, customer: str) -> list[dict]:
    """Every order of `customer`, from the warehouse's API."""
    async with httpx.AsyncClient(base_url=warehouse_url, timeout=30) as client:  # pragma: no mutate (a demo constant: no lesson is about the client's timeout)
        response = await client.get(f"/orders/{customer}")
        response.raise_for_status()
        return response.json()["orders"]


def store_report(warehouse_url: str, report: dict) -> None:
    """Save the report in the warehouse; its storage client is synchronous, like most SDKs."""
    with httpx.Client(base_url=warehouse_url, timeout=30) as client:  # pragma: no mutate (a demo constant: no lesson is about the client's timeout)
        client.put(f"/reports/{report['customer']}", json=report).raise_for_status()
