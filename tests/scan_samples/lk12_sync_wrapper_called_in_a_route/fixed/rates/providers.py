"""Exchange rates from the provider's async SDK, for code that is not async."""
import asyncio

import httpx


async def _fetch(base: str) -> dict:
    async with httpx.AsyncClient(timeout=5) as client:
        resp = await client.get(f"https://rates.example/latest?base={base}")
        return resp.json()["rates"]


def latest_rates(base: str = "EUR") -> dict:
    with asyncio.Runner() as runner:
        return runner.run(_fetch(base))


def rate(base: str, quote: str) -> float:
    return latest_rates(base)[quote]


def run_sync(coro):
    """Runs a coroutine from sync code, on a thread of its own when a loop already runs here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    raise RuntimeError("run_sync() called on an event loop's thread: await the coroutine instead")


if __name__ == "__main__":
    print(asyncio.run(_fetch("EUR")))
