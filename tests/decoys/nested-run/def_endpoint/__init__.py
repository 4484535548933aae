"""Decoy: make POST /reports a plain def, as kata 08 taught, so that FastAPI runs it on a thread: the job never starts, because create_task needs a running loop on that thread.

A plain def endpoint runs on a thread of FastAPI's threadpool, and that thread
runs no event loop. That is what a job needs, but not what dispatch() needs:
asyncio.create_task() schedules a task on the loop running in the calling
thread, and there is none, so dispatch() raises "no running event loop" and
every request answers 500. The endpoint was never the problem: the job ran
on the loop because dispatch() put it there.
"""
