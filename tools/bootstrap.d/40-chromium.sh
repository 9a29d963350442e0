#!/usr/bin/env bash
# Debian's chromium for the dashboard's browser test (Playwright drives /usr/bin/chromium; it
# cannot download its own browsers here). Idempotent: returns at once when chromium is installed.
# Needs root (apt-get); otherwise prints how to install it and the browser test skips, saying why.
set -euo pipefail
if [[ -x /usr/bin/chromium ]]; then
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' \
    "chromium is not installed and this is not root: run 'sudo apt-get update && sudo apt-get install -y chromium' for the dashboard browser test (it skips until then)" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' "no apt-get: install chromium at /usr/bin/chromium for the dashboard browser test" >&2
  exit 0
fi
printf '\033[1;34m[bootstrap]\033[0m %s\n' "installing Debian chromium (dashboard browser test)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
[[ -x /usr/bin/chromium ]] || { echo "chromium missing after apt-get install" >&2; exit 1; }
