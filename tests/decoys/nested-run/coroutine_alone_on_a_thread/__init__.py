"""Decoy: make run_async() hand the coroutine to a thread of its own and wait for it: the error goes, but the rest of the job still runs on the API's loop, which now also waits.

asyncio.run() no longer refuses: it runs on a pool thread, where no loop is
running. Only the function the traceback named moved. The job itself still
runs on the loop's thread, inside the task dispatch() created: while the
orders are fetched, the loop waits for the pool (.result()), and the job's
synchronous store call holds it as well. Every request of the API waits for
each report.
"""
