#!/usr/bin/env bash
# The js-ipfs test daemon (ipfs@0.66.1, Kubo-compatible RPC API) for the SDK's IPFS tests.
# `npm install`, not `npm ci`: js-ipfs pulls electron-eval, whose optional dependency `headless` is a GitHub
# tarball this network cannot reach and the lock cannot name; `npm ci` calls that lock out of sync and stops
# (CI failed so at ff7d529), `npm install` skips the optional package and leaves the lock unchanged (checked on
# a fresh clone with an empty npm cache). Idempotent: returns at once when tools/ipfs/node_modules matches package.json + package-lock.json.
set -euo pipefail
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
DIR="$ROOT/tools/ipfs"
STAMP="$DIR/node_modules/.intellect-stamp"
want="$(cat "$DIR/package.json" "$DIR/package-lock.json" 2>/dev/null | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -f "$DIR/node_modules/ipfs/src/cli.js" ]]; then
  exit 0
fi
printf '\033[1;34m[bootstrap]\033[0m %s\n' "installing the js-ipfs test daemon in tools/ipfs" >&2
cd "$DIR"
npm install --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error
[[ -f node_modules/ipfs/src/cli.js ]] || { echo "ipfs CLI missing after npm install" >&2; exit 1; }
echo "$want" > "$STAMP"
