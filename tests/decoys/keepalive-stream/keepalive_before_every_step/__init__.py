"""Decoy: a keepalive before every step as well, so that a slow step is announced at once.

Slow steps stream as they should, but when sections come quickly each one is
preceded by a keepalive: a draft of a hundred short sections sends a hundred
comments in a few milliseconds. That is the flood the interval exists to
prevent (every keepalive is a write to the socket and a wake-up for every
proxy on the way). A keepalive is owed only after `interval` seconds of quiet.
"""
