"""Charges an order through the payment provider's API, retrying a dropped connection."""
import asyncio
import logging

import aiohttp

log = logging.getLogger(__name__)


async def charge(session: aiohttp.ClientSession, api: str, order: dict) -> dict:
    for attempt in range(3):
        try:
            async with session.post(f"{api}/charges", json=order) as resp:  # expect: LK11
                resp.raise_for_status()
                return await resp.json()
        except aiohttp.ClientConnectionError:
            if attempt == 2:
                raise
            await asyncio.sleep(0.2 * 2 ** attempt)
    raise RuntimeError("unreachable")
