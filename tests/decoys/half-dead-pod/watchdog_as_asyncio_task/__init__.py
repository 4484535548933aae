"""Decoy: keep the watchdog an asyncio task and make it exit the worker when its sleep comes back late.

The task runs on the event loop it watches. While the loop is frozen nothing
on it runs, the watchdog included: it wakes only when the freeze ends, and a
loop frozen for good never lets it wake. The worker stays frozen, the
supervisor's ping is answered by another thread, and nothing replaces it. The
watchdog must run where a frozen loop cannot stop it: a thread of its own.
"""
