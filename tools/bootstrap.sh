#!/usr/bin/env bash
# Installs everything intellect-protocol needs into the checkout, from a bare machine:
#   .venv/          Python 3.11 venv holding exactly requirements.lock (hash-checked): torch 2.13.0 (CPU),
#                   brownie 1.22.2 + its exact pins, slither, the ml and dev extras; this package editable
#   node_modules/   solc 0.8.37 (soljson), anvil (@foundry-rs/anvil), @openzeppelin/contracts
#   .venv/bin/solc  -> tools/solc/solc-v0.8.37 (solc-compatible wrapper; replaces solc-select's,
#                   which hangs offline), .venv/bin/anvil -> the npm anvil binary
#   a .pth file     so the venv's python/brownie find the compiler (SOLCX_BINARY_PATH) and anvil
#                   (PATH) without any environment set by hand
#   tools/bootstrap.d/*.sh  further steps (each idempotent), run in name order
# Idempotent; when nothing it depends on changed it finishes in well under a second.
set -euo pipefail
shopt -s nullglob

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv"
STAMP="$VENV/.bootstrap-stamp"
# The interpreter that makes the venv is found outside it (the Makefile puts .venv/bin first on PATH, and a
# venv being remade has no python of its own).
HOST_PATH="$(printf '%s' "$PATH" | tr ':' '\n' | grep -vxF "$VENV/bin" | paste -sd: -)"
PYTHON="${PYTHON:-$(PATH="$HOST_PATH" command -v python3.11 || PATH="$HOST_PATH" command -v python3 || echo python3.11)}"

log() { printf '\033[1;34m[bootstrap]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[bootstrap] error:\033[0m %s\n' "$*" >&2; exit 1; }

fingerprint() {
  local files=(pyproject.toml requirements.lock tools/check_lock.py setup.py package.json package-lock.json
               tools/bootstrap.sh tools/bootstrap-apt.sh tools/solc/solc-wrapper.js tools/bootstrap.d/*.sh)
  cat "${files[@]}" | sha256sum | cut -d' ' -f1
}

want="$(fingerprint)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/brownie" \
      && -x "$ROOT/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil" ]]; then
  exit 0
fi

"$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
  || die "Python 3.11 is required (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"
command -v node >/dev/null || die "node (>= 20) is required for the Solidity compiler and anvil"
command -v npm >/dev/null || die "npm is required"

# A venv whose creation was interrupted (no pip yet) is made again, not reused half-built.
if [[ -x "$VENV/bin/python" ]] && ! "$VENV/bin/python" -c 'import pip' 2>/dev/null; then
  log "recreating $VENV (its creation was interrupted: no pip)"
  rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
# The lock must be the resolution of pyproject.toml's dependencies (else: 'make lock', commit both).
"$VENV/bin/python" tools/check_lock.py \
  || die "requirements.lock does not match pyproject.toml (see above): run 'make lock' and commit it with a reason"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check)

# Exactly the locked environment, every file hash-checked: pip, setuptools and wheel, torch 2.13.0+cpu
# (the CPU wheel on this disk, pip's find-links; never PyPI's CUDA build), brownie with its exact pins
# (web3 7.16.0 ...), slither, the ML stack. --no-deps: the lock is complete, nothing is resolved here.
log "installing the locked Python environment (requirements.lock)"
"${PIP[@]}" install -q --require-hashes --no-deps -r requirements.lock
# this package itself, editable, built with the locked setuptools (no isolated build env from PyPI); an
# egg-info left in the checkout by an older install would shadow the installed metadata (entry points)
# for any process started here
rm -rf "$ROOT"/*.egg-info
"${PIP[@]}" install -q --no-deps --no-build-isolation -e .
"${PIP[@]}" check >/dev/null || { "${PIP[@]}" check >&2; die "the installed environment is inconsistent (pip check)"; }

# `npm ci`: exactly package-lock.json, which it never rewrites (a fresh clone stays clean after `make test`;
# `npm install` added the other platforms' optional anvil binaries to the lock, 72 lines). The lock lists
# them now, so npm 11 calls it in sync. Skipped when node_modules was installed from this very lock.
ANVIL="$ROOT/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
NPM_STAMP="$ROOT/node_modules/.intellect-stamp"
npm_want="$(cat "$ROOT/package.json" "$ROOT/package-lock.json" | sha256sum | cut -d' ' -f1)"
if [[ ! -x "$ANVIL" || ! -f "$NPM_STAMP" || "$(cat "$NPM_STAMP")" != "$npm_want" ]]; then
  log "installing npm packages from package-lock.json (solc, anvil, OpenZeppelin)"
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
  [[ -x "$ANVIL" ]] || die "anvil binary missing after npm ci ($ANVIL)"
  echo "$npm_want" > "$NPM_STAMP"
fi

ln -sf "$ROOT/tools/solc/solc-v0.8.37" "$VENV/bin/solc"
ln -sf "$ANVIL" "$VENV/bin/anvil"
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
cat > "$SITE/intellect_toolchain.pth" <<PTH
import os; os.environ.setdefault("SOLCX_BINARY_PATH", "$ROOT/tools/solc"); os.environ["PATH"] = "$VENV/bin" + os.pathsep + os.environ.get("PATH", "") if "$VENV/bin" not in os.environ.get("PATH", "").split(os.pathsep) else os.environ["PATH"]
PTH

for step in tools/bootstrap.d/*.sh; do
  [[ -e "$step" ]] || continue
  log "running $step"
  VENV="$VENV" ROOT="$ROOT" bash "$step"
done

"$VENV/bin/solc" --version | grep -q 0.8.37 || die "solc wrapper does not answer --version"
"$VENV/bin/anvil" --version >/dev/null || die "anvil does not run"
echo "$want" > "$STAMP"
log "done"
