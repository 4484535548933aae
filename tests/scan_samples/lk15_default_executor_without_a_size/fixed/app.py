"""The API's startup: a default executor for asyncio.to_thread and run_in_executor(None, ...)."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

from cpus import cpu_limit
from fastapi import FastAPI

app = FastAPI()


@app.on_event("startup")
async def executor() -> None:
    pool = ThreadPoolExecutor(max_workers=min(32, cpu_limit() + 4), thread_name_prefix="blocking")
    asyncio.get_running_loop().set_default_executor(pool)


def rebuild_index(paths: list[str]) -> None:
    """A command-line job: its pool lives as long as the with block."""
    with ThreadPoolExecutor() as pool:
        list(pool.map(print, paths))
