"""Decoy: -Q schema,insight, the queues the routes name, and not the default one.

The routed tasks run now, and everything that is not routed (the digest mails)
is stranded in the default queue instead.
"""
