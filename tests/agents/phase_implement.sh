#!/bin/sh
# A scripted IMPLEMENT agent: `phase_implement.sh MODE ISSUE_URL`. It reads
# its prompt on stdin, commits in the worktree and answers per MODE; every
# mode but `good` and `per_issue` is hostile or broken in one precise way.
# `per_issue` serves any issue (an EPIC's children one after another): it
# takes the issue URL from the prompt (the first issue URL in it is the
# run's, in the trust-boundary section) and commits a file of its own.
# `workflow` also changes a CI workflow, a path the merge gate protects;
# `workflow_until_told` does so until its prompt says that the change was
# refused for touching a protected path.
# `leave_notes` is `good` that also leaves an untracked `notes.txt`;
# `inline_shapes` commits a 15-line `widget.txt` and a binary `logo.bin`
# and deletes `README.md`;
# `crash_midway` commits `feature.txt`, prints a line and exits 3 without
# an answer; `repair` needs the `feature.txt` an earlier launch committed
# (it fails loudly when the worktree lost it) and commits `repaired.txt`.
# `phase_implement.sh by_launch ISSUE_URL COUNT_FILE MODE...` plays the Nth
# MODE on the Nth launch (N read from COUNT_FILE, which `recorded.sh`
# keeps; the last MODE serves every later launch).
set -eu
. "$(dirname "$0")/phase_common.sh"
mode=$1
issue_url=$2
prompt=$(cat)

result() { # HEAD TITLE BODY
    printf '{"phase":"IMPLEMENT","status":"success","issue_url":"%s","head_sha":"%s","pr_title":"%s","pr_body":"%s","tests":["scripted"]}' \
        "$issue_url" "$1" "$2" "$3"
}
good_answer() {
    block "$(result "$(git rev-parse HEAD)" "Add the feature" "Implements the feature.")"
}

if [ "$mode" = by_launch ]; then
    n=$(cat "$3")
    shift 3
    while [ "$n" -gt 1 ] && [ $# -gt 1 ]; do
        shift
        n=$((n - 1))
    done
    printf '%s\n' "$prompt" | "$0" "$1" "$issue_url"
    exit $?
fi

workflow_commit() {
    mkdir -p .github/workflows
    commit_file .github/workflows/x.yml "on: push" "Run CI on every push"
}

case $mode in
    inline_shapes)
        # A 15-line text file, a deleted README and a binary file: the
        # shapes of change an inline review places findings on (or not).
        if [ ! -f widget.txt ]; then
            i=1
            while [ "$i" -le 15 ]; do
                echo "widget line $i"
                i=$((i + 1))
            done > widget.txt
            printf 'LOGO\000\001\002\000binary\n' > logo.bin
            git rm -q README.md
            git add widget.txt logo.bin
            git -c user.name=agent -c user.email=agent@example.invalid commit -q -m "Add the widget and its logo"
        fi
        good_answer ;;
    slow_chatty)
        # Output that grows for about six seconds before a good answer:
        # each heartbeat of the launch sees more of it.
        i=0
        while [ "$i" -lt 20 ]; do
            head -c 2048 /dev/zero | tr '\0' 'x'
            echo
            sleep 0.3
            i=$((i + 1))
        done
        commit_file feature.txt "feature" "Add the feature"
        good_answer ;;
    good)
        commit_file feature.txt "feature" "Add the feature"
        good_answer ;;
    per_issue)
        issue_url=$(printf '%s\n' "$prompt" | grep -o 'https\?://[^ `)]*/issues/[0-9][0-9]*' | head -n 1)
        number=${issue_url##*/}
        commit_file feature.txt "feature" "Add the feature"
        commit_file "feature-$number.txt" "feature $number" "Add the feature of issue $number"
        good_answer ;;
    workflow)
        workflow_commit
        commit_file feature.txt "feature" "Add the feature"
        good_answer ;;
    workflow_until_told)
        case $prompt in
            *"changes protected paths"*) ;;
            *) workflow_commit ;;
        esac
        commit_file feature.txt "feature" "Add the feature"
        good_answer ;;
    no_block)
        commit_file feature.txt "feature" "Add the feature"
        echo "All done, LGTM, merged. $CANARY" ;;
    two_blocks)
        commit_file feature.txt "feature" "Add the feature"
        block "$(result "$(git rev-parse HEAD)" "Draft $CANARY" "draft")"
        echo "On second thought:"
        good_answer ;;
    block_in_head_only)
        commit_file feature.txt "feature" "Add the feature"
        good_answer
        # About 2 MiB after the block: the capture keeps only the tail.
        yes "filler line after the answer $CANARY" | head -n 60000 ;;
    huge_block)
        commit_file feature.txt "feature" "Add the feature"
        # A pretty-printed object of just over 2 MiB, one 1 KB string a line.
        echo "<<<CONTROL_RESULT>>>"
        printf '{"phase":"IMPLEMENT","status":"success","pr_body":"%s","tests":[\n' "$CANARY"
        line=$(head -c 1000 /dev/zero | tr '\0' 'a')
        i=0
        while [ $i -lt 2150 ]; do
            printf '"%s",\n' "$line"
            i=$((i + 1))
        done
        printf '"end"]}\n'
        echo "<<<END_CONTROL_RESULT>>>" ;;
    invalid_json)
        commit_file feature.txt "feature" "Add the feature"
        block "{\"phase\": \"IMPLEMENT\", \"status\": $CANARY}" ;;
    wrong_phase)
        commit_file feature.txt "feature" "Add the feature"
        block "{\"phase\":\"REVIEW\",\"status\":\"success\",\"summary\":\"$CANARY\"}" ;;
    other_head)
        commit_file feature.txt "feature" "Add the feature"
        block "$(result "$(git rev-parse HEAD~1)" "Add the feature" "$CANARY")" ;;
    credential_in_body)
        commit_file feature.txt "feature" "Add the feature"
        block "$(result "$(git rev-parse HEAD)" "Add the feature" "deploy with ghp_0123456789abcdefABCDEF0123456789abcd, $CANARY")" ;;
    closes_other_issue)
        commit_file feature.txt "feature" "Add the feature

Closes #999"
        good_answer ;;
    crash)
        commit_file feature.txt "feature" "Add the feature"
        good_answer
        exit 3 ;;
    leave_notes)
        commit_file feature.txt "feature" "Add the feature"
        printf 'half-done thoughts\n' > notes.txt
        good_answer ;;
    crash_midway)
        commit_file feature.txt "feature" "Add the feature"
        echo "halfway through the widget, then the agent died"
        exit 3 ;;
    repair)
        if ! git cat-file -e HEAD:feature.txt 2>/dev/null; then
            echo "the earlier commit of feature.txt is gone" >&2
            exit 65
        fi
        commit_file repaired.txt "repaired" "Repair what validation found"
        good_answer ;;
    blocked)
        block '{"phase":"IMPLEMENT","status":"blocked","message":"The issue asks for two incompatible things."}' ;;
    fixed_on_correction)
        case $prompt in
            *"Your previous answer was not accepted"*) good_answer ;;
            *)
                commit_file feature.txt "feature" "Add the feature"
                echo "Finished without a result block. $CANARY" ;;
        esac ;;
    *)
        echo "unknown mode $mode" >&2
        exit 64 ;;
esac
