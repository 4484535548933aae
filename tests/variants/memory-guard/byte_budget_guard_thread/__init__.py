"""Variant: the smallest limit of the cgroup and its ancestors; the queue bounded in bytes; the guard a thread that wakes the loop."""
