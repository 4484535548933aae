#!/bin/sh
# Run the worker in the background so that the shell can forward docker stop's SIGTERM.
python -m ingest.worker &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"  # returns as soon as the trap has run
trap - TERM INT
wait "$child"  # returns once the worker has stopped, with its status
echo "worker exited with $?"
