"""Variant: a signal.signal handler that schedules main's cancellation on the loop."""
