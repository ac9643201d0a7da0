# Shared by the demo agents (sourced, not run). Each agent reads the
# controller's prompt on stdin, works in the worktree it is started in and
# answers with one CONTROL_RESULT block on stdout. They stand in for a
# coding-agent CLI in `autoforge demo`; they hold no credential and reach
# no network.

# The whole prompt, read once so several fields can be taken from it.
read_prompt() {
    PROMPT=$(cat)
}

# The first capture of the sed expression $1 over the prompt.
prompt_field() { # SED_EXPRESSION
    printf '%s\n' "$PROMPT" | sed -n "$1" | head -n 1
}

# The read-context folder named by the trust-boundary section.
context_dir() {
    prompt_field 's/^`\([^`]*\)` (outside your worktree).*/\1/p'
}

# Text escaped as the inside of a JSON string (quotes, backslashes, lines).
json_text() { # TEXT
    printf '%s\n' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' |
        awk '{ if (NR > 1) printf "\\n"; printf "%s", $0 }'
}

# The helper the newest demo-agent commit added under lib/: the one this
# issue's branch is about, since earlier issues were merged before it.
branch_helper() {
    git log --author='autoforge demo agent' --diff-filter=A --name-only --format= -- 'lib/*.sh' |
        sed -n 's|^lib/\(.*\)\.sh$|\1|p' | head -n 1
}

commit_all() { # MESSAGE
    git add -A
    if git diff --cached --quiet; then
        return 0
    fi
    git -c user.name='autoforge demo agent' -c user.email=demo-agent@example.invalid \
        commit -q -m "$1"
}

answer() { # JSON
    echo "<<<CONTROL_RESULT>>>"
    printf '%s\n' "$1"
    echo "<<<END_CONTROL_RESULT>>>"
}
