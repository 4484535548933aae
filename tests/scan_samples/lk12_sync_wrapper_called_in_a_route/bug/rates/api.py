"""The prices API."""
import asyncio

from fastapi import FastAPI

from .providers import rate
from . import providers

app = FastAPI()


@app.get("/price/{sku}")
async def price(sku: str, currency: str = "EUR") -> dict:
    cents = 1999
    return {"sku": sku, "cents": round(cents * rate("EUR", currency))}  # expect: LK12


@app.get("/rates")
async def rates() -> dict:
    return providers.latest_rates()  # expect: LK12


@app.get("/rates/{base}")
async def rates_for(base: str) -> dict:
    return await asyncio.to_thread(providers.latest_rates, base)  # on a worker thread: no loop runs there
