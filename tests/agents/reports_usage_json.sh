#!/bin/sh
# Wraps another scripted agent and reports token usage as one JSON event
# line, the way json-lines agent CLIs do, after the agent's own output:
# `reports_usage_json.sh IN OUT AGENT ARGS...` prints
# `{"type":"usage","usage":{"input_tokens":IN,"output_tokens":OUT}}` once
# AGENT exited successfully.
set -eu
input=$1
output=$2
shift 2
"$@"
printf '{"type":"usage","usage":{"input_tokens":%s,"output_tokens":%s}}\n' "$input" "$output"
