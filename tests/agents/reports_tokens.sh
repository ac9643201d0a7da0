#!/bin/sh
# Wraps another scripted agent and reports token usage the way agent CLIs
# do, after the agent's own output: `reports_tokens.sh N AGENT ARGS...`
# prints `tokens used: N` once AGENT exited successfully.
set -eu
tokens=$1
shift
"$@"
echo "tokens used: $tokens"
