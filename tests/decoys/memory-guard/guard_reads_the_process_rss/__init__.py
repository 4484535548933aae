"""Decoy: the guard watches the worker's own resident memory (/proc/self/statm), not the cgroup's usage.

Why it is wrong: the limit counts the whole cgroup: every process in the container
(a helper the worker starts, a log shipper) and the page cache of the files they
touch. The worker's own memory stays under 80% behind its bounded queue while the
container's goes to 100%, and the OOM killer picks the biggest process: the worker.
"""
