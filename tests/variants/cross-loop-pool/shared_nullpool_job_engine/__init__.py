"""Variant: one module-level NullPool engine for every job, never disposed.

With NullPool an engine keeps no connection: each checkout opens one on the
loop that asks and closes it when given back, so one engine can serve jobs on
any number of loops, one after another or at once.
"""
