# Shared by the phase_*.sh scripted agents (sourced, not run).
# A string no controller text contains: tests assert it never reaches a
# diagnosis, which must name fields and rules, not echo the agent.
CANARY='CANARY-7f3e-hostile-agent-text'

# Commits FILE with CONTENT, unless an earlier attempt (before a correction
# relaunch) already did: the work stays, only the answer is redone.
commit_file() { # FILE CONTENT MESSAGE
    printf '%s\n' "$2" > "$1"
    git add "$1"
    if git diff --cached --quiet; then
        return 0
    fi
    git -c user.name=agent -c user.email=agent@example.invalid commit -q -m "$3"
}

block() { # JSON
    echo "<<<CONTROL_RESULT>>>"
    printf '%s\n' "$1"
    echo "<<<END_CONTROL_RESULT>>>"
}
