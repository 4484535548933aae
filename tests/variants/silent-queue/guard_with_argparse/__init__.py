"""Variant: a guard that lets argparse read the worker's options.

It reads a Procfile as a platform does, one command per process type (a later
`worker:` line replaces an earlier one), and judges the command that is kept,
where the reference fix refuses such a file outright.
"""
