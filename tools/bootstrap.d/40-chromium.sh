#!/usr/bin/env bash
# Debian's chromium for the dashboard's browser test (Playwright drives /usr/bin/chromium; it cannot download its
# own browsers here). Idempotent; without it the browser test skips, saying why.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bootstrap-apt.sh"
apt_step chromium '[[ -x /usr/bin/chromium ]]' "dashboard browser test" "the dashboard browser test skips until then"
