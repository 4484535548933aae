"""Decoy: the keepalive deadline counted from the last section, not from the last keepalive: once the first keepalive is due, every wait times out at once, and the stream sends keepalives in a busy loop.

The step runs once, in a task of its own, and the cleanup is right. But the
wait before a keepalive is `last_section + interval - now`: after the first
keepalive that is zero or less, and stays so until the next section. So
asyncio.wait returns at once, another keepalive goes out, and again, for as
long as the step runs: tens of thousands of keepalives where one per interval
was due, the event loop busy sending them to every client at once.
"""
