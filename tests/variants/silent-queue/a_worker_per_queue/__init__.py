"""Variant: one worker per queue in docker-compose.yml, and the long spellings of the queue option in the Procfile.

Each kind of work can be scaled on its own, which is what the routes are for.
"""
