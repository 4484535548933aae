#!/bin/bash
set -euo pipefail
# a sidecar-style helper, and the API; the script waits for both
/usr/local/bin/otel-agent --config /etc/otel.yaml &
gunicorn -k uvicorn.workers.UvicornWorker api.main:app --bind 0.0.0.0:8000 &  # expect: LK14
wait -n
