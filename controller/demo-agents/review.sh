#!/bin/sh
# Demo REVIEW agent: `review.sh ISSUE_NUMBER...`. Round 1 of each named
# issue's pull request gets two findings (a missing test case to fix, and a README gap
# to defer to a follow-up issue); every other round is clean. It runs the
# tests but changes nothing in the worktree.
set -eu
. "$(dirname "$0")/common.sh"
strict_issues=" $* "
read_prompt
round=$(prompt_field 's/^# Phase: REVIEW, round \([0-9]*\).*/\1/p')
head=$(prompt_field 's/^- Bound HEAD: `\([0-9a-f]*\)`.*/\1/p')
issue_url=$(prompt_field 's/^- Issue: \([^ ]*\) (untrusted.*/\1/p')
number=${issue_url##*/}
helper=$(branch_helper)
[ -n "$helper" ] || helper="the helper"
if sh test.sh >/dev/null 2>&1; then verdict="passes"; else verdict="fails"; fi

case $strict_issues in
    *" $number "*) strict=true ;;
    *) strict=false ;;
esac
if [ "$round" = 1 ] && [ "$strict" = true ]; then
    needs=true
    findings=$(printf '{"id":"R1-F1","classification":"non-blocked","title":"No test for empty input","location":"tests/test_%s.sh","required_resolution":"Add a case showing what %s prints for an empty string."},{"id":"R1-F2","classification":"nit","title":"The README does not list the helpers","location":"README.md","required_resolution":"Document every helper of lib/ in the README. This concerns all helpers, not only this one."}' \
        "$helper" "$helper")
    assessment="Correct for ordinary input; the edge case needs a test before merging."
else
    needs=false
    findings=""
    assessment="Ready to merge."
fi
answer "$(printf '{"phase":"REVIEW","status":"success","round":%s,"reviewed_head_sha":"%s","needs_fix_round":%s,"findings":[%s],"spec":"Adds the `%s` helper the issue asks for.","standards":"Follows the layout of lib/ and tests/.","assessment":"%s","observations":"None.","verification":"Ran `sh test.sh` at the bound HEAD: it %s.","summary":"Round %s reviewed."}' \
    "$round" "$head" "$needs" "$findings" "$helper" "$assessment" "$verdict" "$round")"
