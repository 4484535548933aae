"""The API's startup: a default executor for asyncio.to_thread and run_in_executor(None, ...)."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

from fastapi import FastAPI

app = FastAPI()


@app.on_event("startup")
async def executor() -> None:
    pool = ThreadPoolExecutor(thread_name_prefix="blocking")  # expect: LK15
    asyncio.get_running_loop().set_default_executor(pool)


def rebuild_index(paths: list[str]) -> None:
    """A command-line job: its pool lives as long as the with block."""
    with ThreadPoolExecutor() as pool:
        list(pool.map(print, paths))
