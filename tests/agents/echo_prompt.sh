#!/bin/sh
# Repeats its prompt: from the file named by $1 when given, else from stdin.
# With $2, also writes a final message there.
set -eu
if [ "$#" -ge 1 ]; then cat "$1"; else cat; fi
if [ "$#" -ge 2 ]; then printf 'final answer\n' > "$2"; fi
