"""Decoy: an RLock, and load()/save() take the file lock themselves too.

Belt and braces: with a reentrant thread lock, load() and save() "may as
well" also take the flock, so they are safe on their own against other
processes. But an flock belongs to the open file, not to the thread: guard()
holds it on one open file, and load() opens the lock file again and asks for
it on a second one. That request waits for the first to be released, by this
same thread, which is waiting: the read-modify-write still deadlocks.
"""
