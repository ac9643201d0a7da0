#!/bin/sh
# Demo IMPLEMENT agent: adds the shell helper the issue names (its body says
# "Helper name: `NAME`") under lib/ with a test under tests/, runs the
# project's tests and commits. Re-running it continues from its own commit.
set -eu
. "$(dirname "$0")/common.sh"
read_prompt
issue_url=$(prompt_field 's/^- Issue: \([^ ]*\) (its text.*/\1/p')
number=${issue_url##*/}
context=$(context_dir)
helper=""
if [ -n "$context" ] && [ -f "$context/issue.md" ]; then
    helper=$(sed -n 's/.*Helper name: `\([a-z_]*\)`.*/\1/p' "$context/issue.md" | head -n 1)
fi
[ -n "$helper" ] || helper="issue_$number"
echo "read the issue from ${context:-nowhere}: helper $helper"

mkdir -p lib tests
case $helper in
    upper)
        cat > lib/upper.sh <<'SH'
# upper TEXT: prints TEXT in capital letters.
upper() {
    printf '%s\n' "$1" | tr '[:lower:]' '[:upper:]'
}
SH
        cat > tests/test_upper.sh <<'SH'
. ./lib/upper.sh
[ "$(upper 'make it loud')" = 'MAKE IT LOUD' ] || { echo "upper: wrong output"; exit 1; }
SH
        ;;
    words)
        cat > lib/words.sh <<'SH'
# words TEXT: prints how many blank-separated words TEXT holds.
words() {
    printf '%s\n' "$1" | wc -w | tr -d ' '
}
SH
        cat > tests/test_words.sh <<'SH'
. ./lib/words.sh
[ "$(words 'one two  three')" = 3 ] || { echo "words: wrong count"; exit 1; }
SH
        ;;
    reverse)
        cat > lib/reverse.sh <<'SH'
# reverse TEXT: prints TEXT with its characters in reverse order.
reverse() {
    printf '%s\n' "$1" | awk '{ out = ""; for (i = length($0); i > 0; i--) out = out substr($0, i, 1); print out }'
}
SH
        cat > tests/test_reverse.sh <<'SH'
. ./lib/reverse.sh
[ "$(reverse 'stressed')" = 'desserts' ] || { echo "reverse: wrong output"; exit 1; }
SH
        ;;
    *)
        printf '# %s: prints a fixed line for issue %s.\n%s() {\n    echo done\n}\n' \
            "$helper" "$number" "$helper" > "lib/$helper.sh"
        printf '. ./lib/%s.sh\n[ "$(%s)" = done ] || { echo "%s: wrong output"; exit 1; }\n' \
            "$helper" "$helper" "$helper" > "tests/test_$helper.sh"
        ;;
esac
sh test.sh >/dev/null
commit_all "Add the $helper helper with a test"

body="Adds \`lib/$helper.sh\` and its test \`tests/test_$helper.sh\`.

\`sh test.sh\` runs every test of the project and passes."
answer "$(printf '{"phase":"IMPLEMENT","status":"success","issue_url":"%s","head_sha":"%s","pr_title":"Add the %s helper","pr_body":"%s","tests":["sh test.sh"]}' \
    "$issue_url" "$(git rev-parse HEAD)" "$helper" "$(json_text "$body")")"
