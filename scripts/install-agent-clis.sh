#!/usr/bin/env bash
# Installs the pinned coding-agent CLIs that the `real_agent_*` tests drive
# (Claude Code, Codex CLI, OpenCode) into a cache directory outside the
# repository, once per version. Run it or source it:
#
#     scripts/install-agent-clis.sh           # installs, prints the bin dir
#     source scripts/install-agent-clis.sh    # also exports AUTOFORGE_AGENT_CLI_CACHE
#
# The cache is ${AUTOFORGE_AGENT_CLI_CACHE:-$HOME/.cache/autoforge-agent-clis};
# each package lives in its own `<name>@<version>` prefix, and `bin/` holds
# one link per CLI (`claude`, `codex`, `opencode`) that the tests look for.
# A package already present is not fetched again. Node and npm come from
# Debian's packages when missing (as root; otherwise install them yourself).
set -euo pipefail

# Pinned versions: the tests' stream shapes and argv were checked against these.
agent_cli_packages=(
  "@anthropic-ai/claude-code@2.1.328 claude"
  "@openai/codex@0.169.0 codex"
  "opencode-ai@1.18.33 opencode"
)

agent_cli_fail() {
  echo "install-agent-clis: $*" >&2
  return 1
}

agent_cli_need_node() {
  if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    agent_cli_fail "node and npm are missing; install them (Debian: apt-get install nodejs npm)"
    return 1
  fi
  echo "install-agent-clis: installing nodejs and npm from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
}

# Installs one package into its own prefix. The install goes to a temporary
# sibling first and is renamed into place, so an interrupted run never leaves
# a half-installed prefix that a later run would take as complete.
agent_cli_install_one() {
  local cache=$1 spec=$2 bin=$3
  local prefix="$cache/pkgs/${spec//\//+}"
  if [ ! -x "$prefix/node_modules/.bin/$bin" ]; then
    echo "install-agent-clis: installing $spec"
    local staging
    staging=$(mktemp -d "$cache/pkgs/.staging.XXXXXX")
    if ! npm install --prefix "$staging" --no-audit --no-fund --no-update-notifier \
      --loglevel=error --save-exact "$spec" >"$staging.log" 2>&1; then
      cat "$staging.log" >&2
      rm -rf "$staging" "$staging.log"
      agent_cli_fail "npm install $spec failed"
      return 1
    fi
    rm -f "$staging.log"
    rm -rf "$prefix"
    mv "$staging" "$prefix"
  fi
  ln -sfn "$prefix/node_modules/.bin/$bin" "$cache/bin/$bin"
  "$cache/bin/$bin" --version >/dev/null 2>&1 \
    || { agent_cli_fail "$cache/bin/$bin --version failed"; return 1; }
}

agent_cli_main() {
  local cache=${AUTOFORGE_AGENT_CLI_CACHE:-$HOME/.cache/autoforge-agent-clis}
  agent_cli_need_node || return 1
  mkdir -p "$cache/pkgs" "$cache/bin"
  cache=$(cd "$cache" && pwd -P)
  # Left by an install that was killed midway.
  rm -rf "$cache"/pkgs/.staging.*
  local entry
  for entry in "${agent_cli_packages[@]}"; do
    # shellcheck disable=SC2086 # "spec bin" splits on purpose
    agent_cli_install_one "$cache" $entry || return 1
  done
  export AUTOFORGE_AGENT_CLI_CACHE=$cache
  echo "install-agent-clis: CLIs in $cache/bin"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  agent_cli_main
else
  agent_cli_main || return 1
fi
