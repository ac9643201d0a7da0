#!/usr/bin/env bash
# Installs the pinned browser driver the browser tests use (playwright-core,
# which drives Debian's `chromium`; it downloads no browser of its own) into
# a cache directory outside the repository, once per version. Run or source:
#
#     scripts/install-browser-tools.sh          # installs, prints the package dir
#     source scripts/install-browser-tools.sh   # also exports PLAYWRIGHT_CORE_PATH
#
# The cache is ${AUTOFORGE_BROWSER_TOOLS_CACHE:-$HOME/.cache/autoforge-browser-tools}.
set -euo pipefail

browser_tools_package="playwright-core@1.65.1"

browser_tools_install() {
  local cache=${AUTOFORGE_BROWSER_TOOLS_CACHE:-$HOME/.cache/autoforge-browser-tools}
  local prefix="$cache/${browser_tools_package//\//+}"
  if [ ! -f "$prefix/node_modules/playwright-core/package.json" ]; then
    command -v npm >/dev/null 2>&1 || { echo "install-browser-tools: npm is missing (Debian: apt-get install npm)" >&2; return 1; }
    echo "install-browser-tools: installing $browser_tools_package" >&2
    mkdir -p "$cache"
    local staging
    staging=$(mktemp -d "$cache/.staging.XXXXXX")
    PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --prefix "$staging" --no-fund --no-audit --silent \
      "$browser_tools_package" >&2
    rm -rf "$prefix"
    mv "$staging" "$prefix"
  fi
  PLAYWRIGHT_CORE_PATH="$prefix/node_modules/playwright-core"
  export PLAYWRIGHT_CORE_PATH
  echo "$PLAYWRIGHT_CORE_PATH"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  browser_tools_install
else
  browser_tools_install >/dev/null
fi
