#!/bin/sh
set -e
case "${ROLE:-web}" in
  web)
    exec uvicorn reports.api:app --host 0.0.0.0 --port 8000
    ;;
  worker)
    celery -A reports.celery_app worker --loglevel=INFO  # expect: LK14
    ;;
  *)
    echo "unknown ROLE ${ROLE}" >&2
    exit 64
    ;;
esac
