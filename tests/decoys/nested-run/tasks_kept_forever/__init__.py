"""Decoy: keep each job's to_thread task in _running, without the done callback that discards it: every finished job stays in memory for good.

The reference is kept, so drain() waits and the loop's weak hold does not
matter. But nothing ever removes a task: each finished job keeps its task,
its result and its arguments for as long as the process lives, one more per
report.
"""
