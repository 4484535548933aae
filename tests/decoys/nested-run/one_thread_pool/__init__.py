"""Decoy: run jobs with run_in_executor on a pool of one thread: every job works, but they queue behind each other.

The job runs off the loop and its asyncio.run() works. But one thread runs
one job at a time: a report that waits minutes for the warehouse makes every
report started after it wait as long, and a job whose work is done cannot
start before the ones ahead of it have finished.
"""
