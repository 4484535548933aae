"""The crawler: a fixed number of fetch-and-parse workers, all reading one queue."""
import asyncio

WORKERS = 8  # I/O-bound: the CPU count says nothing of how many fetches can wait at once


async def worker(queue: asyncio.Queue) -> None:
    while True:
        url = await queue.get()
        try:
            await asyncio.sleep(0, url)  # fetch and parse
        finally:
            queue.task_done()


async def crawl(urls: list[str]) -> None:
    queue: asyncio.Queue = asyncio.Queue()
    for url in urls:
        queue.put_nowait(url)
    tasks = []
    for _ in range(WORKERS):
        tasks.append(asyncio.create_task(worker(queue)))
    await queue.join()
    for task in tasks:
        task.cancel()
