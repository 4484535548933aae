"""Variant: an asyncio.TaskGroup whose guard task raises Shed; the reference limits.py."""
