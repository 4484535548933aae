"""Decoy: give drain() a deadline, `await asyncio.wait(set(_running), timeout=1.0)`: the app's shutdown gives up on a job still running.

The runner keeps every job, and the job runs on a worker thread, so every
request answers and every job finishes while the server serves. But a
report can take minutes, and drain() stops waiting after one second: the
server reports itself stopped, the process exits, and the job still running
is killed with its report half built. How long a deploy may wait is the
platform's to decide (its grace period); drain() must wait for every job.
"""
