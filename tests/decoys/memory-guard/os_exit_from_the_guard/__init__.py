"""Decoy: the guard ends the process itself, at once, with os._exit(EXIT_SHED).

Why it is wrong: the status is the worker's own choice, and it comes before the kill,
but os._exit() stops the process on the spot, as SIGKILL would: no finally runs, the
checkpoint is not written, and the next start replays everything the worker had handled.
"""
