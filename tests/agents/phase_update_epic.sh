#!/bin/sh
# A scripted UPDATE_EPIC agent: `phase_update_epic.sh MODE`. It writes the
# progress note and roadmap section without touching the worktree; the
# `rerequest_*` modes answer a re-request for the next issue only.
# `sequence COUNTER URL...` answers the Nth launch (N kept in the file
# COUNTER, outside the worktree) with the Nth URL as the next issue, and
# with `null` (EPIC complete) once the URLs are used up; asked again, it
# answers only the fields the re-request lists (`COUNTER.log` records
# `full` or `again` per launch). `after URL...` picks the URL after the
# issue just finished, as the prompt names it (null after the last).
# `following CHILDREN` serves any EPIC whose CHILDREN sub-issues are
# numbered right after it: it picks the issue after the one just
# finished, and `null` after the last child.
set -eu
. "$(dirname "$0")/phase_common.sh"
mode=$1
prompt=$(cat)
case $mode in
    after)
        # `after URL...`: the next issue is the one after the issue just
        # finished in the given order (null after the last), read from the
        # prompt, so a relaunch after a crash answers the same.
        shift
        finished=$(printf '%s\n' "$prompt" | grep -o 'Issue just finished: .*' | grep -o '/issues/[0-9][0-9]*' | head -n 1)
        next=null
        step=0
        found=0
        for url in "$@"; do
            step=$((step + 1))
            if [ "$found" = 1 ]; then
                next="\"$url\""
                break
            fi
            case $url in
                *"$finished") found=1; done_step=$step ;;
            esac
        done
        case $prompt in
            *"UPDATE_EPIC (asked again)"*)
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success","roadmap_section":"- step %s of the EPIC is done","next_issue_url":%s}' "${done_step:-0}" "$next")" ;;
            *)
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success","progress":"Step %s: the issue is finished and merged.","roadmap_section":"- step %s of the EPIC is done","next_issue_url":%s}' \
                    "${done_step:-0}" "${done_step:-0}" "$next")" ;;
        esac ;;
    sequence)
        counter=$2
        shift 2
        done_count=$(cat "$counter" 2>/dev/null || echo 0)
        echo $((done_count + 1)) > "$counter"
        next=null
        if [ "$done_count" -lt $# ]; then
            shift "$done_count"
            next="\"$1\""
        fi
        step=$((done_count + 1))
        case $prompt in
            *"UPDATE_EPIC (asked again)"*)
                echo again >> "$counter.log"
                roadmap=""
                case $prompt in
                    *'"roadmap_section": "<new section content>"'*)
                        roadmap=$(printf '"roadmap_section":"- step %s of the EPIC is done",' "$step") ;;
                esac
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success",%s"next_issue_url":%s}' "$roadmap" "$next")" ;;
            *)
                echo full >> "$counter.log"
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success","progress":"Update %s: the issue is finished and merged.","roadmap_section":"- step %s of the EPIC is done","next_issue_url":%s}' \
                    "$step" "$step" "$next")" ;;
        esac ;;
    following)
        children=$2
        epic_url=$(printf '%s\n' "$prompt" | sed -n 's/^- EPIC: \([^ ]*\).*/\1/p' | head -n 1)
        finished_url=$(printf '%s\n' "$prompt" | sed -n 's/^- Issue just finished: \([^ ]*\).*/\1/p' | head -n 1)
        epic=${epic_url##*/}
        finished=${finished_url##*/}
        step=$((finished - epic))
        next=null
        if [ "$step" -lt "$children" ]; then
            next="\"${finished_url%/*}/$((finished + 1))\""
        fi
        roadmap=$(printf '"roadmap_section":"- step %s of the EPIC is done",' "$step")
        case $prompt in
            *"UPDATE_EPIC (asked again)"*)
                case $prompt in
                    *'"roadmap_section": "<new section content>"'*) ;;
                    *) roadmap="" ;;
                esac
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success",%s"next_issue_url":%s}' "$roadmap" "$next")" ;;
            *)
                block "$(printf '{"phase":"UPDATE_EPIC","status":"success","progress":"Step %s: the issue is finished and merged.",%s"next_issue_url":%s}' \
                    "$step" "$roadmap" "$next")" ;;
        esac ;;
    good)
        block '{"phase":"UPDATE_EPIC","status":"success","progress":"The widget issue is finished and merged.","roadmap_section":"- [x] widgets\n- [ ] gadgets","next_issue_url":null}' ;;
    rerequest_next)
        block '{"phase":"UPDATE_EPIC","status":"success","next_issue_url":"https://github.com/octo/widgets/issues/8"}' ;;
    rerequest_with_progress)
        block "{\"phase\":\"UPDATE_EPIC\",\"status\":\"success\",\"progress\":\"$CANARY\",\"next_issue_url\":null}" ;;
    *)
        echo "unknown mode $mode" >&2
        exit 64 ;;
esac
