"""Decoy: the reference fix's database access, and a dispatch that waits for the job to finish.

Each job runs in a thread of its own with a loop of its own, and only then
does dispatch() return its id: no connection ever crosses loops, and every job
succeeds. But while a job runs, the API's event loop is stuck inside
dispatch(), and no request is answered until the job is done.
"""
