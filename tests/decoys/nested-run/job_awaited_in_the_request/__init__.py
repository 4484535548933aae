"""Decoy: make dispatch() async and await asyncio.to_thread(...) in it, from the endpoint: the job works, but the request waits for all of it.

The job runs on a worker thread, so its asyncio.run() works and the loop
stays free. But the endpoint awaits the job: POST /reports answers only when
the report is done, the client that was promised a job id at once waits
minutes for it, and a proxy's timeout cuts the request while the job goes on.
"""
