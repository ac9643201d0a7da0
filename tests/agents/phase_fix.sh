#!/bin/sh
# A scripted FIX agent: `phase_fix.sh MODE FINDING_ID...`. It commits one
# fix on top of the reviewed HEAD and resolves the findings per MODE; the
# `follow_up` mode commits nothing and defers every finding to a new
# follow-up issue for the controller to create; `defer_listed` (no
# finding ids needed) defers this round's finding R<round>-F1 to the first
# follow-up issue the prompt lists, or asks for a new one when none is;
# `workflow` is `good` that also adds a CI workflow (a protected path);
# `fix_and_defer FIXED DEFERRED` fixes one finding and defers the other.
set -eu
. "$(dirname "$0")/phase_common.sh"
mode=$1
shift
prompt=$(cat)
if [ "$mode" = defer_listed ]; then
    head=$(git rev-parse HEAD)
    round=$(printf '%s\n' "$prompt" | grep -o 'after review round [0-9]*' | head -n 1)
    id="R${round##* }-F1"
    listed=$(printf '%s\n' "$prompt" | grep -o 'R[0-9]*-F[0-9]*: https\?://[^ `]*/issues/[0-9]*' | head -n 1)
    if [ -n "$listed" ]; then
        entry=$(printf '{"finding_id":"%s","resolution":"follow_up_created","follow_up_issue_url":"%s"}' "$id" "${listed#* }")
    else
        entry=$(printf '{"finding_id":"%s","resolution":"follow_up_created","follow_up_issue":{"title":"Edge cases of the feature","body":"Edge cases the review raised, tracked here."}}' "$id")
    fi
    block "$(printf '{"phase":"FIX","status":"success","previous_head_sha":"%s","head_sha":"%s","resolutions":[%s]}' \
        "$head" "$head" "$entry")"
    exit 0
fi
if [ "$mode" = fix_and_defer ]; then
    # FIXED_ID DEFERRED_ID: commits `fix-<issue>.txt` (the issue's number
    # from the prompt, so an EPIC's children each fix their own file) and
    # defers the second finding to a new follow-up issue. A relaunch after
    # a crash finds its fix committed and answers for it again.
    issue_url=$(printf '%s\n' "$prompt" | grep -o 'https\?://[^ `)]*/issues/[0-9][0-9]*' | head -n 1)
    number=${issue_url##*/}
    if [ -f "fix-$number.txt" ]; then
        previous=$(git rev-parse HEAD~1)
    else
        previous=$(git rev-parse HEAD)
        commit_file "fix-$number.txt" "fixed $number" "Address the review of issue $number"
    fi
    head=$(git rev-parse HEAD)
    fixed=$(printf '{"finding_id":"%s","resolution":"fixed","commit_sha":"%s"}' "$1" "$head")
    deferred=$(printf '{"finding_id":"%s","resolution":"follow_up_created","follow_up_issue":{"title":"Revisit the greeting (after issue %s)","body":"The review of issue %s raised it; tracked here so the change can land."}}' "$2" "$number" "$number")
    block "$(printf '{"phase":"FIX","status":"success","previous_head_sha":"%s","head_sha":"%s","resolutions":[%s,%s]}' \
        "$previous" "$head" "$fixed" "$deferred")"
    exit 0
fi
if [ "$mode" = follow_up ]; then
    head=$(git rev-parse HEAD)
    resolutions=""
    for id in "$@"; do
        entry=$(printf '{"finding_id":"%s","resolution":"follow_up_created","follow_up_issue":{"title":"Add a test for the feature (%s)","body":"The review asked for a test; it is tracked here so the change can land."}}' "$id" "$id")
        resolutions="${resolutions:+$resolutions,}$entry"
    done
    block "$(printf '{"phase":"FIX","status":"success","previous_head_sha":"%s","head_sha":"%s","resolutions":[%s]}' \
        "$head" "$head" "$resolutions")"
    exit 0
fi
if [ -f fix.txt ]; then
    # A correction relaunch: the fix commit of the first attempt is HEAD.
    previous=$(git rev-parse HEAD~1)
else
    previous=$(git rev-parse HEAD)
    commit_file fix.txt "fixed" "Address the review findings"
    if [ "$mode" = workflow ]; then
        mkdir -p .github/workflows
        commit_file .github/workflows/x.yml "on: push" "Run CI on every push"
    fi
fi
head=$(git rev-parse HEAD)

if [ "$mode" = missing_resolution ]; then
    # Resolve every finding but the last one.
    count=$#
    set -- $(printf '%s\n' "$@" | head -n $((count - 1)))
elif [ "$mode" != good ] && [ "$mode" != workflow ]; then
    echo "unknown mode $mode" >&2
    exit 64
fi
resolutions=""
for id in "$@"; do
    entry=$(printf '{"finding_id":"%s","resolution":"fixed","commit_sha":"%s"}' "$id" "$head")
    resolutions="${resolutions:+$resolutions,}$entry"
done
block "$(printf '{"phase":"FIX","status":"success","previous_head_sha":"%s","head_sha":"%s","resolutions":[%s]}' \
    "$previous" "$head" "$resolutions")"
