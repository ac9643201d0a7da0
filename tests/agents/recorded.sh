#!/bin/sh
# Wraps another scripted agent so a scenario can see and pace it:
# `recorded.sh DIR NAME HOLD AGENT ARGS...`. Launch N of NAME (numbered by
# the DIR/NAME.N.claimed folders) saves its prompt as DIR/NAME.N.prompt
# (its environment as DIR/NAME.N.env) and touches DIR/NAME.N.started;
# when N is in HOLD (comma-separated launch numbers, or `none`) it then
# waits for the test to create DIR/NAME.N.release before it runs AGENT
# with the prompt on stdin. The launch's read-context folder (named in
# the prompt) is copied to DIR/NAME.N.context, so a test asserts the
# files the agent saw. DIR lies outside the worktree, and the agent gets
# no GitHub credential, so a test acts on GitHub itself while the agent
# waits.
set -eu
dir=$1
name=$2
hold=$3
shift 3
# Launches of one NAME run at once (a run per EPIC, say): each claims its
# number N by creating DIR/NAME.N.claimed, which only one of them can
# (mkdir is atomic), so no two launches share (and overwrite) a prompt file.
n=1
while ! mkdir "$dir/$name.$n.claimed" 2>/dev/null; do
    n=$((n + 1))
done
# The latest number, for the `by_launch` agents, which read it to know
# which launch they are (they serve one run, so launches do not overlap).
echo "$n" > "$dir/$name.count"
cat > "$dir/$name.$n.prompt"
# The environment the launch was given, for the secrets scan.
env > "$dir/$name.$n.env"
context=$(sed -n 's/^`\(\/[^`]*\)` (outside your worktree).*/\1/p' "$dir/$name.$n.prompt" | head -n 1)
if [ -n "$context" ] && [ -d "$context" ]; then
    cp -R "$context" "$dir/$name.$n.context"
fi
touch "$dir/$name.$n.started"
case ",$hold," in
    *",$n,"*)
        waited=0
        while [ ! -e "$dir/$name.$n.release" ]; do
            if [ "$waited" -ge 900 ]; then
                echo "never released" >&2
                exit 75
            fi
            sleep 0.1
            waited=$((waited + 1))
        done ;;
esac
exec "$@" < "$dir/$name.$n.prompt"
