"""Decoy: pin connections to every worker, then take the worker whose /health waited longest for the one that served the slow request.

Which worker served the slow request is a fact of where its connection goes,
not a guess from latencies. When the other worker is frozen by something else
while the slow request runs, the guess names the wrong worker, and the drill
judges it: a fail for a build without the bug. Find the slow connection's owner
through /proc before sending the slow request on it.
"""
