"""Variant: the reference wrapper with its keepalives on a schedule: the next one is due one interval after the last section, then one interval after the one before it (not after the wait ended), so that a late keepalive does not push back the ones after it.

asyncio.wait waits for the step until the next keepalive is due and cancels
nothing. Each keepalive moves the due time on by exactly one interval, and a
section sets it one interval after itself: one keepalive per interval of
quiet, never more, however late the event loop gets to them. The same finally
as the reference fix stops the step and closes the generator.
"""
