"""The grading engine: a kata's hidden tests run in a subprocess under a deadline, and the verdict in words.

runner (the check; impl_checks: can the implementation be read and imported), supervise (its deadline, memory cap and clean-up, run as a script),
pytest_plugin (inside the check: a fresh module per test), bounded, hangs, locks and frames
(the hang guard hidden tests use, public as loopkata.testing), cpu_wait (deadlines that a busy
machine moves back, by the time the code waited for a CPU), stackdump, report (the verdict
as text), repro (a notebook's reproduction in a subprocess).
"""
