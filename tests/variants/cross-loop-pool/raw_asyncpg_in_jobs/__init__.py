"""Variant: each job opens one raw asyncpg connection of its own, from DATABASE_URL, and closes it.

The job never touches SQLAlchemy's engine: asyncpg.connect() opens a connection
on the job's own loop, the statement runs on it, and it is closed before the
loop ends. DATABASE_URL is the plain postgresql:// URL a service is given, which
asyncpg takes as it is; the API keeps its pooled engine.
"""
