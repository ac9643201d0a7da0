#!/bin/sh
# A scripted PLAN agent: `phase_plan.sh MODE`. It reads the worktree
# without touching it and answers per MODE. The plan's version comes from
# the prompt's phase heading, so a replan's plan differs from the first.
set -eu
. "$(dirname "$0")/phase_common.sh"
mode=$1
prompt=$(cat)
version=$(printf '%s\n' "$prompt" | grep -o 'Phase: PLAN, version [0-9]*' | head -n 1)
version=${version##* }
# Read-only: the worktree is only looked at.
git rev-parse HEAD > /dev/null

plan() { # QUESTIONS
    printf '{"phase":"PLAN","status":"success","summary":"Plan version %s: add feature.txt with the feature.",' "$version"
    printf '"steps":["Write feature.txt (plan %s).","Commit it."],"files":["feature.txt"],' "$version"
    printf '"risks":["None worth noting."],"questions":[%s]}' "$1"
}
questions='{"id":"1","question":"Which greeting should the feature print?","default":"hello"},{"id":"2","question":"Should it log?","default":"no"},{"id":"3","question":"Which runtime?","default":"std"}'

case $mode in
    questions) block "$(plan "$questions")" ;;
    no_questions) block "$(plan "")" ;;
    blocked) block '{"phase":"PLAN","status":"blocked","message":"The issue does not say what the feature is."}' ;;
    *)
        echo "unknown mode $mode" >&2
        exit 64 ;;
esac
