"""Decoy: NullPool on the one shared engine, for the API too.

Jobs stop failing: no connection is ever kept, so none crosses loops. But the
API now opens a new connection (TCP handshake, authentication, a new server
process) for every request, and closes it after: the pool was there for the
API, which has one long-lived loop and nothing to fear from it.
"""
