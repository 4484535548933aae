"""A websocket feed that pings the client while the generator is quiet."""
import asyncio


async def forward(websocket, updates, quiet: float) -> None:
    while True:
        try:
            async with asyncio.timeout(quiet):  # expect: LK09
                update = await updates.__anext__()
        except TimeoutError:
            await websocket.send_text("ping")
            continue
        except StopAsyncIteration:
            return
        await websocket.send_text(update)
