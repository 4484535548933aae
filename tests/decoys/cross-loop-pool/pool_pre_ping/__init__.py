"""Decoy: pool_pre_ping=True, so a bad pooled connection is "noticed and replaced".

Pre-ping tests a connection with a round trip before lending it out, which
catches a connection the server closed. A connection that belongs to another
event loop is not closed: the ping itself is what fails, with the same error.
"""
