"""Sends a notification through every channel; a failed channel is logged with its traceback."""
import asyncio
import logging

logger = logging.getLogger(__name__)


async def notify(channels: dict, message: str) -> list[str]:
    names = list(channels)
    results = await asyncio.gather(*(channels[n](message) for n in names), return_exceptions=True)
    failed = []
    for name, result in zip(names, results):
        if isinstance(result, Exception):
            logger.warning("channel %s failed: %s", name, result, exc_info=result)
            failed.append(name)
    return failed
