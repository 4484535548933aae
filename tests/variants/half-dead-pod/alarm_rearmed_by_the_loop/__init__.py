"""Variant: the loop re-arms an interval timer; if it stops re-arming, SIGALRM ends the worker."""
