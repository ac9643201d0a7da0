#!/bin/sh
# Says one thing, then goes quiet without exiting.
cat >/dev/null
echo "thinking"
exec sleep 1000
