"""CPU-bound scoring off the event loop, in worker processes."""
import asyncio
from concurrent.futures import ProcessPoolExecutor

from .cpus import cpu_limit
from .model import score

POOL = ProcessPoolExecutor(max_workers=cpu_limit())


async def score_async(features: list[float]) -> float:
    return await asyncio.get_running_loop().run_in_executor(POOL, score, features)
