"""Variant: the drill on asyncio streams, and a watchdog thread that asks the loop to answer within the whole limit."""
