#!/usr/bin/env bash
# Debian's bubblewrap: the code sandbox (intellect.verifier.sandbox) runs every completion under bwrap;
# without it code tasks are refused (SandboxUnavailableError), never run unconfined. Idempotent: returns
# at once when bwrap is installed. Needs root (apt-get); otherwise prints how to install it.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' \
    "bubblewrap is not installed and this is not root: run 'sudo apt-get update && sudo apt-get install -y bubblewrap' (code tasks are refused until then)" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' "no apt-get: install bubblewrap (bwrap) with this system's package manager (code tasks are refused until then)" >&2
  exit 0
fi
printf '\033[1;34m[bootstrap]\033[0m %s\n' "installing Debian bubblewrap (the code sandbox)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null
command -v bwrap >/dev/null 2>&1 || { echo "bwrap missing after apt-get install bubblewrap" >&2; exit 1; }
