#!/bin/bash
set -euo pipefail
# the helper in the background; the API replaces the shell and hears SIGTERM itself
/usr/local/bin/otel-agent --config /etc/otel.yaml &
exec gunicorn -k uvicorn.workers.UvicornWorker api.main:app --bind 0.0.0.0:8000
