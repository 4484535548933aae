"""Decoy: delete the routes, so every task goes to the default queue the worker already consumes.

Every task completes again, and the guard has nothing to find. But the
queues existed so that schema work could have workers of its own: now a
schema sync waits in one line behind every slow question.
"""
