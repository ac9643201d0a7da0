#!/bin/sh
# Demo UPDATE_EPIC agent: `update_epic.sh CHILD_NUMBER...` (the EPIC's
# issues in order). Reports the merge without any URL, rewrites the
# roadmap (keeping the pull requests the current one names) and picks the
# next child after the finished one that `epic-issues.md` does not show as
# closed; none left means null.
set -eu
. "$(dirname "$0")/common.sh"
read_prompt
finished_url=$(prompt_field 's/^- Issue just finished: \([^ ]*\).*/\1/p')
pr_url=$(prompt_field 's/^- Pull request just merged: \([^ ]*\).*/\1/p')
finished=${finished_url##*/}
pr=${pr_url##*/}
issues_base=${finished_url%/*}
context=$(context_dir)
listing=""
if [ -n "$context" ] && [ -f "$context/epic-issues.md" ]; then
    listing="$context/epic-issues.md"
fi

closed() { # NUMBER
    [ -n "$listing" ] && grep -E "(#|/issues/)$1([^0-9]|$)" "$listing" | grep -qi 'closed'
}

next=""
roadmap=""
seen_finished=false
for child in "$@"; do
    if [ "$child" = "$finished" ]; then
        seen_finished=true
        line="- [x] #$child: merged in #$pr"
    elif [ "$seen_finished" = false ]; then
        # Keep the pull request an earlier update recorded for it.
        line=$(printf '%s\n' "$PROMPT" | grep -E "^- \[x\] #$child: merged in #[0-9]+$" | head -n 1)
        [ -n "$line" ] || line="- [x] #$child: merged"
    elif [ -z "$next" ] && ! closed "$child"; then
        next=$child
        line="- [ ] #$child: next"
    else
        line="- [ ] #$child: remaining"
    fi
    roadmap="${roadmap:+$roadmap
}$line"
done
if [ -n "$next" ]; then next_json="\"$issues_base/$next\""; else next_json=null; fi
progress="Pull request #$pr is merged, which completes #$finished. The project's tests (\`sh test.sh\`) pass on the merged branch."

case $PROMPT in
    *"# Phase: UPDATE_EPIC (asked again)"*)
        # Only what the controller asks for again, and never `progress`.
        asks=$(printf '%s\n' "$PROMPT" | sed -n '/^The controller needs/,/again/p')
        fields=""
        case $asks in *next_issue_url*) fields="\"next_issue_url\":$next_json" ;; esac
        case $asks in
            *roadmap_section*)
                fields="${fields:+$fields,}\"roadmap_section\":\"$(json_text "$roadmap")\"" ;;
        esac ;;
    *)
        fields="\"progress\":\"$(json_text "$progress")\",\"roadmap_section\":\"$(json_text "$roadmap")\",\"next_issue_url\":$next_json" ;;
esac
answer "{\"phase\":\"UPDATE_EPIC\",\"status\":\"success\"${fields:+,$fields}}"
