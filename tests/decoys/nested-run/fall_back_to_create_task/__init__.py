"""Decoy: catch the RuntimeError in run_async() and schedule the coroutine on the running loop instead: the job gets a task where it expected its result.

run_async() must return what the coroutine returns, and the job goes on with
it at once. A task scheduled on the loop has not run yet (the job holds the
loop's thread), so the job computes its report from a Task object, fails
with a TypeError, and the orders are fetched later, for nobody.
"""
