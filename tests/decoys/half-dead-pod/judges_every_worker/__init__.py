"""Decoy: pin connections to every worker and fail when any of them waited too long for /health, whichever worker it was.

In clean mode, the slow request leaves its own worker free, but the other
worker is frozen meanwhile by something else: the drill says fail for a build
that does not have the bug. What the drill measures is what its slow request
does to the worker that serves it; the other worker is background, reported
in `worst` but not judged.
"""
