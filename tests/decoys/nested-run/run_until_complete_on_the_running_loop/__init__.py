"""Decoy: replace asyncio.run() with get_event_loop().run_until_complete(), to reuse the loop that is already running: a running loop cannot be run again.

From inside the API's loop, get_event_loop() returns that very loop, which is
running, and run_until_complete() raises "This event loop is already running".
The job still runs on the loop's thread, and still fails at once.
"""
