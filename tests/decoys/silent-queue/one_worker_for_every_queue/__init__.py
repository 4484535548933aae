"""Decoy: one worker consumes every queue, `-Q schema,insight,celery`, in both deploy files.

Every kind of task completes, and the guard is satisfied. But the queues were
made so that each kind of work can have workers of its own: with one worker
for all of them, a schema sync sent while slow questions are being answered
waits until a question is done, so every question asked about a new source
waits for the questions before it. That is the hold-up the routes exist to
prevent.
"""
