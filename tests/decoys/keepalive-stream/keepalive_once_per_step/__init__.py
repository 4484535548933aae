"""Decoy: asyncio.wait on the step's task, one keepalive when it is slow, then wait for it with no timeout: one keepalive per step, then silence for the rest of it.

Nothing is cancelled and nothing is restarted, and the cleanup is right. But
one keepalive per slow step only restarts the load balancer's idle timer
once: a step that runs longer than the interval after that keepalive (a
step of ten minutes behind a 350 s timer) is cut off all the same.
"""
