"""Decoy: a lock of its own for each of guard(), load() and save(), and a plain def endpoint.

No thread ever asks for a lock it holds, so nothing deadlocks, and update()
still keeps other updates out through guard(). But load() and save() no
longer take the lock that update() holds: a save() from another thread (an
admin reset, a migration) goes through in the middle of a read-modify-write,
and the update then writes its own copy over it. The save is lost without a
trace, and the file ends in a state that no order of the two calls could
give. Locks that guard the same file must be the same lock.
"""
