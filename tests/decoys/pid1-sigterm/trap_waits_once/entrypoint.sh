#!/bin/sh
# Container entrypoint: prepare the state folder, then start the export service.
set -e
cd "$(dirname "$0")"
mkdir -p "${EXPORT_STATE:-/var/lib/export}"
echo "entrypoint: state in ${EXPORT_STATE:-/var/lib/export}, starting the export service"
# Forward docker stop's SIGTERM to the service, and wait for it.
python service.py &
child=$!
trap 'kill -TERM "$child"' TERM
wait "$child"
