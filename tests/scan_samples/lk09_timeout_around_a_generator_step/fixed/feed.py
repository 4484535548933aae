"""A websocket feed that pings the client while the generator is quiet, without cancelling its step."""
import asyncio


async def forward(websocket, updates, quiet: float) -> None:
    step = None
    try:
        while True:
            if step is None:
                step = asyncio.ensure_future(updates.__anext__())
            done, _ = await asyncio.wait({step}, timeout=quiet)
            if not done:
                await websocket.send_text("ping")
                continue
            finished, step = step, None
            try:
                update = finished.result()
            except StopAsyncIteration:
                return
            await websocket.send_text(update)
    finally:
        if step is not None:
            step.cancel()
            await asyncio.gather(step, return_exceptions=True)
        await updates.aclose()
