#!/bin/sh
# A hostile agent: starts a grandchild that ignores SIGTERM, writes the
# grandchild's pid to the file named by $1, then sleeps far past any limit.
set -eu
pidfile=$1
sh -c 'trap "" TERM; while :; do sleep 1; done' &
echo $! > "$pidfile"
echo "started grandchild $!"
trap '' TERM
while :; do sleep 1; done
