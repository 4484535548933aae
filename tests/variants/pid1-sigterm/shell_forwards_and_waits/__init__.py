"""Variant: the shell stays PID 1, forwards SIGTERM to the service and waits for it to end."""
