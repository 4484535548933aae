"""Decoy: a pooled engine of its own for every job, never disposed, and a garbage collection after each job.

The collection frees each job's engine, and with it the connection its pool
kept open, so the server's count of connections is back to the API's pool
after every job. But nothing closed those connections: the collector tore
them down (asyncpg warns "unclosed connection" for each), and in a process
where it runs late, or never gets to them, they stay open on the server.
"""
