#!/bin/sh
# An implementer that does its job: reads the prompt, commits one file on the
# detached HEAD, and answers with a CONTROL_RESULT naming the new commit.
set -eu
cat >/dev/null
printf 'implemented by the scripted agent\n' > IMPLEMENTED.md
git add IMPLEMENTED.md
git -c user.name=agent -c user.email=agent@example.invalid commit -q -m "Add IMPLEMENTED.md"
head=$(git rev-parse HEAD)
echo "working..."
echo "<<<CONTROL_RESULT>>>"
printf '{"phase":"IMPLEMENT","status":"success","head_sha":"%s"}\n' "$head"
echo "<<<END_CONTROL_RESULT>>>"
echo "tokens used: 12,345" >&2
