"""Variant: a pooled engine of its own for every job, disposed when the job ends.

The pool lives and dies with the job's loop: the job's connections are opened
on its loop and closed by dispose() before asyncio.run() closes it.
"""
