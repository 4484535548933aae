"""Decoy: a pooled engine of its own for every job, disposed afterwards with a second asyncio.run() on a new loop.

No connection crosses into the API's pool, every job succeeds, and the
server's count of connections falls back after each job. But dispose() runs
on a loop that did not open the job's connection: closing it fails ("attached
to a different loop", "Event loop is closed"), SQLAlchemy logs the error and
drops the connection, and its socket is left for the garbage collector
("unclosed transport"). Nothing closed it cleanly.
"""
