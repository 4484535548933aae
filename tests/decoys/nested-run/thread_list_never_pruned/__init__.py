"""Decoy: start a threading.Thread per job, append it to a list, and have drain() join them all: every thread ever started stays in the list for good.

The job runs on a thread of its own, its asyncio.run() works, the request
answers at once, and drain() waits (joining on the loop's thread, which
blocks the loop for the whole shutdown: see threads_joined_in_drain). And
nothing ever leaves the list: one Thread object more per report, for as long
as the process lives, and a drain() that walks every job since the process
started.
"""
