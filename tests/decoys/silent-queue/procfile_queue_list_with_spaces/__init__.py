"""Decoy: in the Procfile, -Q "schema, insight, celery", the queue list written with spaces.

Celery splits the list on commas only, so the worker consumes 'schema',
' insight' and ' celery', spaces included, and nothing is ever sent to the
last two. On Redis that worker starts and the questions and digests stay
PENDING in silence; on the broker of files it exits at start-up with
"Invalid exchange name".
"""
