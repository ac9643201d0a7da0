#!/bin/sh
# A scripted UPDATE_EPIC agent: `phase_update_epic.sh MODE`. It writes the
# progress note and roadmap section without touching the worktree; the
# `rerequest_*` modes answer a re-request for the next issue only.
set -eu
. "$(dirname "$0")/phase_common.sh"
mode=$1
cat >/dev/null
case $mode in
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
