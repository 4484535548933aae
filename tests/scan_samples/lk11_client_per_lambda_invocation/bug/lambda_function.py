"""AWS Lambda: enriches an uploaded record with the catalogue service's data."""
import asyncio

import httpx

CATALOGUE = "https://catalogue.internal"


async def enrich(record: dict) -> dict:
    async with httpx.AsyncClient(base_url=CATALOGUE, timeout=5) as client:  # expect: LK11
        resp = await client.get(f"/products/{record['sku']}")
        resp.raise_for_status()
        return {**record, "product": resp.json()}


async def main(event: dict) -> list[dict]:
    return [await enrich(record) for record in event["records"]]


def lambda_handler(event, context):
    return {"records": asyncio.run(main(event))}
