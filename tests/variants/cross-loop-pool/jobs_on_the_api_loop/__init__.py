"""Variant: hand each job's coroutine to the API's loop with run_coroutine_threadsafe.

dispatch() remembers the API's running loop; run_async(), in the job's worker
thread, submits the coroutine there and waits for its result. Every database
call runs on the one loop that owns the pool, and the worker thread only waits.
"""
