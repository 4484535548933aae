"""Variant: SIGTERM sets an Event that main waits on; no cancellation at all."""
