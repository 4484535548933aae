"""Decoy: remove the threading lock, keep the flock.

The deadlock is gone, and other processes are still kept out by the flock.
But the lock file is opened once per process and shared by its threads, and
an flock belongs to the open file: a thread that "takes" it while another
thread of the same process holds it gets it at once. Two threads of the
threadpool then read the same count and both write count + 1: lost updates.
"""
