#!/bin/sh
# Run the worker in the background so that the shell can forward docker stop's SIGTERM.
python -m ingest.worker &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"  # expect: LK14
echo "worker exited with $?"
