"""The crawler: one fetch-and-parse worker per CPU, all reading one queue."""
import asyncio
import multiprocessing


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
    for _ in range(multiprocessing.cpu_count()):  # expect: LK15
        tasks.append(asyncio.create_task(worker(queue)))
    await queue.join()
    for task in tasks:
        task.cancel()
