# Sourced (not run) by tools/bootstrap-trl.sh and tools/bootstrap-vllm.sh, which set TAG first: the checkout
# root as the working directory, the host's Python 3.11, log/die tagged with the caller's name, and make_venv.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3

log() { printf '\033[1;34m[%s]\033[0m %s\n' "$TAG" "$*" >&2; }
die() { printf '\033[1;31m[%s] error:\033[0m %s\n' "$TAG" "$*" >&2; exit 1; }

# make_venv DIR: a venv at DIR (made with Python 3.11 when it has no python yet); sets PIP to its pip.
make_venv() {
  "$PYTHON" -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    || die "Python 3.11 is required (found $("$PYTHON" --version 2>&1)); set PYTHON=/path/to/python3.11"
  if [[ ! -x "$1/bin/python" ]]; then
    log "creating $1"
    "$PYTHON" -m venv "$1"
  fi
  PIP=("$1/bin/python" -m pip --disable-pip-version-check)
}
