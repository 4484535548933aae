"""Decoy: a watchdog thread that asks the loop to answer a probe and exits the worker the first time it takes more than 0.1 s.

It catches a frozen loop quickly, and a busy one too: a loop that runs a
half-second request, or that waits for the CPU on a loaded machine, misses one
probe and its worker dies with every request it was serving. The limit is the
time a loop may be held; only a loop that has not turned for longer than that
is frozen.
"""
