#!/bin/sh
# Runs migrations, then the worker.
set -e
python -m exports.migrate
exec celery -A exports.tasks worker --concurrency=4 --loglevel=INFO  # expect: LK07
