#!/bin/sh
# Container entrypoint: prepare the state folder, then start the export service.
set -e
cd "$(dirname "$0")"
mkdir -p "${EXPORT_STATE:-/var/lib/export}"
echo "entrypoint: state in ${EXPORT_STATE:-/var/lib/export}, starting the export service"
python service.py
