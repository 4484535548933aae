#!/bin/sh
cd /opt/consumer
exec python -m consumer --group "${GROUP:-billing}"
