#!/bin/sh
# A reviewer that is supposed to be read-only but edits a tracked file.
set -eu
cat >/dev/null
printf 'reviewer was here\n' >> README.md
echo "<<<CONTROL_RESULT>>>"
echo '{"phase":"REVIEW","status":"success"}'
echo "<<<END_CONTROL_RESULT>>>"
