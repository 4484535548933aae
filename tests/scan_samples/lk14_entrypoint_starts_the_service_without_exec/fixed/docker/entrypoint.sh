#!/bin/sh
set -e
# one-off steps run as children, and end before the service starts
python manage.py migrate --noinput
python manage.py collectstatic --noinput
echo "starting the API on :${PORT:-8000}"
exec python -m api --port "${PORT:-8000}"
