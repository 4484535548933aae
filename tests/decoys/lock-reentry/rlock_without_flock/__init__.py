"""Decoy: an RLock, and drop the file lock ("the thread lock is enough").

No deadlock, and the threads of one process are kept apart. But a thread
lock lives in one process: the other worker processes of the pod have their
own and write the same file. Two processes read the same count and both
write count + 1: lost updates.
"""
