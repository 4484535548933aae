"""Decoy: asyncio.wait instead of wait_for, on a new anext(events) task at every wait: the second anext meets the generator still running the step and fails, breaking the response.

asyncio.wait cancels nothing, so the slow step does run on. But after the
keepalive, the next round asks the generator for its next event again while
the first request is still running the step: an async generator runs one
step at a time, so that anext fails with "asynchronous generator is already
running", the response breaks off, and the first task is left running alone.
"""
