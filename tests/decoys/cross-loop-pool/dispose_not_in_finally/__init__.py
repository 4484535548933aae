"""Decoy: a pooled engine of its own for every job, disposed after the session's block, not in a finally.

Every job that succeeds closes its connection on its own loop, so jobs in a
row, and two at once, leave nothing behind. But a job whose statement fails
raises out of the block and never reaches dispose(): its engine's pool keeps
the connection open, tied to a loop that asyncio.run() is about to close, until
the garbage collector happens to free the engine. One server connection leaks
per failed job (a statement error, a timeout, a cancellation).
"""
