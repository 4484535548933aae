"""Variant: the step in a task, awaited through asyncio.shield with wait_for, and a finally that cancels that task and closes the generator.

The shield takes the timeout's cancellation, so the step runs on while the
keepalive goes out and the next round waits for the same task. The shield
alone would also protect the step from the response's own cancellation when
a client leaves: the finally is what stops it then.
"""
