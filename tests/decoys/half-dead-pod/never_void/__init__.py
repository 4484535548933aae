"""Decoy: keep connecting up to max_connections, then judge the workers it reached, with no third verdict.

When one worker never takes a connection (its loop is already frozen, so it
accepts nothing), the drill judges the other one, finds it healthy and says
pass. A pass that never reached one of the two workers says nothing about it,
and the worker it could not reach is the one that is broken: the drill must
say void.
"""
