"""Decoy: run each job on a threading.Thread kept in a set until it ends, and have drain() call thread.join() on each: the API's event loop is blocked for the whole shutdown.

The job runs on a thread of its own, the request answers at once, and the
runner lets go of each thread when its job ends. But drain() is a coroutine:
it runs on the API's event loop thread, and thread.join() holds that thread
until the job ends, which may take minutes. Meanwhile the loop runs nothing
else: not the server's own shutdown, not a probe, not the callback of another
job.
"""
