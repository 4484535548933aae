"""Decoy: a heartbeat stamped by the loop and read by a thread, but stamped once per limit instead of every quarter of it.

A stamp due once per limit is already a whole limit old when it falls due: if
the loop is busy at that moment, for any time at all, the watchdog thread reads
an age past the limit and ends a worker whose loop was never frozen. A loop
held now and then by a half-second request, or waiting for the CPU on a loaded
machine, costs its worker its life. The heartbeat must come often, so that only
a loop that has not turned for the whole limit looks frozen.
"""
