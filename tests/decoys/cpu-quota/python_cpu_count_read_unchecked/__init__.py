"""Decoy: PYTHON_CPU_COUNT is read with int(), whatever it holds.

PYTHON_CPU_COUNT=default is a valid setting on Python 3.13 (count as usual),
and Python 3.11 and 3.12 ignore the variable, so a word in it was never an
error: int('default') raises ValueError, and the service does not start at
all. A value that is not a number is no limit.
"""
