"""Decoy: a pooled engine of its own for every job, never disposed.

No connection crosses loops any more, so every job succeeds. But the job's
pool keeps its connection open after the job, and after its loop is closed
nothing can close it properly: it stays open on the server until the garbage
collector happens to free the engine.
"""
