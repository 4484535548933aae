"""Decoy: a guard that finds the queues only after the text "-Q ".

It reads every worker and the app's default queue, but --queues=a,b,
--queues a,b and -Qa,b look like "no queue option" to it, so it reports
queues as missing that a worker does consume.
"""
