"""Variant: the Dockerfile starts the service in exec form; the entrypoint script is no longer used."""
