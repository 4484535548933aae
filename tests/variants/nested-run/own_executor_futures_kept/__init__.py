"""Variant: a thread pool of the runner's own, run_in_executor, and the loop's futures kept in _running until done."""
