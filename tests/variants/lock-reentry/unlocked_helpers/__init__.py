"""Variant: a plain Lock, and private helpers that take no lock.

update() holds guard() and reads and writes through _read()/_write(), which
take no lock; only the public load() and save() take guard() themselves.
No thread ever asks for a lock it already holds.
"""
