"""Variant: create_draft stays an async def and awaits loop.run_in_executor(None, ...).

None is the loop's default executor, a pool of min(32, CPUs + 4) threads, so
calls made at once run at once. /drafts is on app.REVIEWED_ASYNC. The access
log is the reference's.
"""
