"""Decoy: keepalives while waiting for the first section only, then a plain async for: every later slow step is silent.

It fixes the case everyone tries first: a draft whose first section is slow.
The first step runs in a task, asyncio.wait sends keepalives while it runs.
After that, the wrapper reads the generator directly, with no keepalive at
all: any later slow step leaves the connection silent for as long as it
takes, and the load balancer counts from the last byte, whatever came before.
"""
