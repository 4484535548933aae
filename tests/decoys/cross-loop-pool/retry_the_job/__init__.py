"""Decoy: retry the job when it fails with "attached to a different loop".

Every attempt runs on a new loop and is handed a connection from the same
shared pool, so the retry fails the same way, and a job that did part of its
work before failing does it again.
"""
