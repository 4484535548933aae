#!/bin/sh
# tini is PID 1, but it signals only its child: this shell, which dies and leaves the API behind
python /app/main.py
