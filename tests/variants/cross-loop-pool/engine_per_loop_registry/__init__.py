"""Variant: one engine per event loop, in a registry that disposes it when the loop's work ends.

get_engine() hands each running loop its own pooled engine; run_async()
disposes the job loop's engine before asyncio.run() closes that loop. The
API's loop keeps its engine (and pool) for its whole life.
"""
