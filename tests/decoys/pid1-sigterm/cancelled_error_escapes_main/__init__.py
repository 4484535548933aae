"""Decoy: exec, and a handler that cancels main, with no `except asyncio.CancelledError`.

The cleanup runs, and then the CancelledError leaves main(): asyncio.run raises it and Python
exits with a traceback and status 1, which the platform reports as a failed container.
"""
