"""Pushes the day's ledger lines to the accounting API: one write per line, a failed line logged and skipped."""
import logging

import aiohttp

log = logging.getLogger(__name__)


async def push_lines(session: aiohttp.ClientSession, api: str, lines: list[dict]) -> int:
    pushed = 0
    for line in lines:
        try:
            async with session.post(f"{api}/ledger", json=line) as resp:
                resp.raise_for_status()
            pushed += 1
        except aiohttp.ClientError:
            log.warning("ledger line %s not pushed", line["id"])
    return pushed


async def balance(session: aiohttp.ClientSession, api: str) -> dict:
    for attempt in range(3):
        try:
            async with session.get(f"{api}/balance") as resp:
                return await resp.json()
        except aiohttp.ClientConnectionError:
            if attempt == 2:
                raise
    return {}
