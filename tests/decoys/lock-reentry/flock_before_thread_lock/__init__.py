"""Decoy: an RLock, but guard() takes the flock first and the thread lock inside it.

"The other processes first, then this process's threads" reads well, and the
deadlock is gone. But the threads of a process share its one open lock file,
and an flock belongs to the open file: a second thread asks for the flock and
gets it at once, then waits for the thread lock. When the first thread
finishes, it lets go of the flock for the whole process, while the second one
is only starting its read-modify-write. A thread of another worker process
then takes the flock and reads the same count: with two processes of two
threads each, updates are lost. Take the thread lock first, so that only one
thread of a process ever holds or releases the flock.
"""
