"""Decoy: one pooled job engine, made on first use and shared by every job, disposed when each job ends.

Jobs one after another each find the pool empty (the last job disposed it),
open a connection on their own loop and close it there. But two jobs at once
share the pool: the first to end disposes it, which closes only the
connections idle in it at that moment and puts a new pool in its place, so the
other job's connection, checked out meanwhile, goes back into the old pool and
stays open, tied to a loop that is about to close. Had the other job checked
out just after the first gave its connection back, it would have been lent a
connection of the first job's loop.
"""
