"""Decoy: patch asyncio with nest_asyncio (nest_asyncio2.apply()) so that asyncio.run() works inside the running loop: the job then runs on the API's loop, and blocks it.

The patched asyncio.run() does not start a loop of its own: it runs the job's
coroutine on the loop already running, by running that loop again from inside
the job's call. The error is gone and the job runs, but on the API's event
loop thread: its synchronous store call freezes every request, /health
included, for as long as the storage API takes. And jobs nest: a job started
while another waits runs inside that one's call, so the first cannot return
before the last has finished.
"""
