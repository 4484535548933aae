"""The service."""
import asyncio


async def main():
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
