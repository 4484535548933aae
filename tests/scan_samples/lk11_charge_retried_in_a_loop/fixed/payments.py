"""Charges an order through the payment provider's API, retrying a dropped connection."""
import asyncio
import logging
import uuid

import aiohttp

log = logging.getLogger(__name__)


async def charge(session: aiohttp.ClientSession, api: str, order: dict) -> dict:
    headers = {"Idempotency-Key": str(uuid.uuid4())}  # one key for every attempt of this charge
    for attempt in range(3):
        try:
            async with session.post(f"{api}/charges", json=order, headers=headers) as resp:
                resp.raise_for_status()
                return await resp.json()
        except aiohttp.ClientConnectionError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.2 * 2 ** attempt)
    raise RuntimeError("unreachable")
