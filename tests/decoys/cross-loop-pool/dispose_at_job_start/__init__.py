"""Decoy: share the API's engine, but dispose() it at the start of every job.

"Throw away the old connections, then the job gets fresh ones." dispose()
empties the pool the API is using, from the job's loop, and the fresh
connection the job opens goes back into that same pool when it is done: the
next API request is handed a connection whose loop has just closed.
"""
