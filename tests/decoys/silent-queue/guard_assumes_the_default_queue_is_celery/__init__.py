"""Decoy: a guard that takes the default queue to be "celery".

It is, until someone sets task_default_queue: then a worker with no -Q
consumes the renamed queue, and the guard checks the wrong one.
"""
