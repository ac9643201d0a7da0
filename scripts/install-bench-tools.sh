#!/usr/bin/env bash
# Installs what the `bench` binary measures autoforge against, into a cache
# outside the repository: Probot (pinned, from npm) for the webhook-ingest
# reference, and checks for wrk (the load generator) and pgbench (Postgres'
# own ceiling). Run it or source it:
#
#     scripts/install-bench-tools.sh          # installs, prints the cache
#     source scripts/install-bench-tools.sh   # also exports AUTOFORGE_BENCH_TOOLS
#
# The cache is ${AUTOFORGE_BENCH_TOOLS:-$HOME/.cache/autoforge-bench-tools};
# Probot lives in `probot@<version>/node_modules`. As root, missing Debian
# packages (wrk, nodejs, npm, postgresql) are installed; otherwise it says
# which to install.
set -euo pipefail

# The reference the ingest figures compare against; a new pin means the
# report's Probot column is a new measurement.
bench_probot_version=14.3.2

bench_tools_fail() {
  echo "install-bench-tools: $*" >&2
  return 1
}

bench_tools_need() { # COMMAND DEBIAN-PACKAGE
  if command -v "$1" >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" != 0 ]; then
    bench_tools_fail "$1 is missing; install it (Debian: apt-get install $2)"
    return 1
  fi
  echo "install-bench-tools: installing $2 from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
}

bench_tools_main() {
  local cache=${AUTOFORGE_BENCH_TOOLS:-$HOME/.cache/autoforge-bench-tools}
  bench_tools_need wrk wrk || return 1
  bench_tools_need pgbench postgresql || return 1
  bench_tools_need node nodejs || return 1
  bench_tools_need npm npm || return 1
  mkdir -p "$cache"
  cache=$(cd "$cache" && pwd -P)
  local prefix="$cache/probot@$bench_probot_version"
  if [ ! -f "$prefix/node_modules/probot/package.json" ]; then
    echo "install-bench-tools: installing probot@$bench_probot_version"
    # Staged and renamed, so an interrupted install is never taken as done.
    rm -rf "$cache"/.staging.*
    local staging
    staging=$(mktemp -d "$cache/.staging.XXXXXX")
    if ! npm install --prefix "$staging" --no-audit --no-fund --no-update-notifier \
      --loglevel=error --save-exact "probot@$bench_probot_version" >"$staging.log" 2>&1; then
      cat "$staging.log" >&2
      rm -rf "$staging" "$staging.log"
      bench_tools_fail "npm install probot@$bench_probot_version failed"
      return 1
    fi
    rm -f "$staging.log"
    rm -rf "$prefix"
    mv "$staging" "$prefix"
  fi
  export AUTOFORGE_BENCH_TOOLS=$cache
  echo "install-bench-tools: tools in $cache"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  bench_tools_main
else
  bench_tools_main || return 1
fi
