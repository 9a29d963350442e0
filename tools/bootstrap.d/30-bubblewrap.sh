#!/usr/bin/env bash
# Debian's bubblewrap: the code sandbox (intellect.verifier.sandbox) runs every completion under bwrap;
# without it code tasks are refused (SandboxUnavailableError), never run unconfined. Idempotent.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bootstrap-apt.sh"
apt_step bubblewrap 'command -v bwrap >/dev/null 2>&1' "the code sandbox" "code tasks are refused until then"
