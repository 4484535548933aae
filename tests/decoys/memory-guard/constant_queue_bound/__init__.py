"""Decoy: the queue bounded by a constant, 1000 records, the number a load test on a big machine settled on.

Why it is wrong: 1000 records of 256 KiB are 250 MiB, more than a 128 MiB (or 256 MiB)
container holds. A bound that does not come from the limit is no bound at all where
the limit is small: the queue fills past 80%, and the worker either sheds load it had
no need to take (the guard) or is killed before the guard looks.
"""
