"""AWS Lambda: enriches an uploaded record with the catalogue service's data."""
import asyncio

import httpx

CATALOGUE = "https://catalogue.internal"
LOOP = asyncio.new_event_loop()  # the container's loop: its client and connections outlive an invocation
_client: httpx.AsyncClient | None = None


async def client() -> httpx.AsyncClient:
    global _client
    if _client is None:
        _client = httpx.AsyncClient(base_url=CATALOGUE, timeout=5)
    return _client


async def enrich(record: dict) -> dict:
    resp = await (await client()).get(f"/products/{record['sku']}")
    resp.raise_for_status()
    return {**record, "product": resp.json()}


async def main(event: dict) -> list[dict]:
    return [await enrich(record) for record in event["records"]]


def lambda_handler(event, context):
    return {"records": LOOP.run_until_complete(main(event))}
