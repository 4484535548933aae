#!/bin/sh
# Runs migrations, then the worker, on every queue the tasks are routed to.
set -e
python -m exports.migrate
exec celery -A exports.tasks worker \
  -Q exports,celery --concurrency=4 --loglevel=INFO
