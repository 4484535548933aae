#!/bin/sh
set -e
case "${ROLE:-web}" in
  web)
    exec uvicorn reports.api:app --host 0.0.0.0 --port 8000
    ;;
  worker)
    exec celery -A reports.celery_app worker --loglevel=INFO
    ;;
  *)
    echo "unknown ROLE ${ROLE}" >&2
    exit 64
    ;;
esac
