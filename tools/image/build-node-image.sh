#!/usr/bin/env bash
# A node image for one role, from Debian packages and the wheel (issue 36): no registry, no base image needed.
#
#   tools/image/build-node-image.sh relay out/          # -> out/intellect-relay-rootfs.tar (+ out/rootfs/)
#   podman import out/intellect-relay-rootfs.tar intellect-relay   # where podman runs (not on this machine's kernel)
#   SYSTEMD=1 tools/image/build-node-image.sh worker out/   # a bootable image: systemd runs the agent's unit
#   systemd-nspawn -D out/rootfs --boot ...               # (tests/image/test_image_swarm.py boots three)
#
# The root filesystem is Debian bookworm minbase + python3 (3.11) + a venv at /opt/intellect/venv with the wheel built
# from this checkout and the role's extra (pyproject.toml), versions pinned to requirements.lock. Worker,
# validator and trainer images take torch from TORCH_INDEX (default: PyPI, whose build is CUDA's; pass
# https://download.pytorch.org/whl/cpu for a CPU image). The entry point is /opt/intellect/venv/bin/intellect-agent,
# where deploy/systemd/intellect-agent@.service runs it. With SYSTEMD=1 the image also has systemd, the `intellect`
# system user and that unit enabled for ROLE (intellect-agent@ROLE, config /etc/intellect/ROLE.yaml, state
# /var/lib/intellect): booted (systemd-nspawn --boot, or podman run ... /sbin/init), systemd starts, watches and
# restarts the agent. TAR=0 skips the tar (the root filesystem is OUT_DIR/rootfs either way).
# Needs root, mmdebstrap (Debian) and network to Debian's mirror and PyPI (fetched on this host, installed offline).
# The model roles also need gcc here (a source-only pin, pycosat, is built into a wheel on this host).
set -euo pipefail
ROLE="${1:?usage: build-node-image.sh worker|validator|trainer|relay OUT_DIR}"
OUT="$(mkdir -p "${2:?OUT_DIR}" && cd "$2" && pwd)"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
case "$ROLE" in worker|validator|trainer|relay) ;; *) echo "unknown role $ROLE" >&2; exit 2;; esac
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# the wheel, from a copy of the sources (the checkout's build/ stays untouched)
mkdir -p "$WORK/src"
cp "$ROOT/setup.py" "$ROOT/pyproject.toml" "$ROOT/README.md" "$WORK/src/"
cp -r "$ROOT/sdk" "$ROOT/verifier" "$ROOT/agents" "$WORK/src/"
find "$WORK/src" -name __pycache__ -prune -exec rm -rf {} +
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"  # a Python with setuptools and wheel (the bootstrap's venv)
"$PYTHON" -m pip wheel --no-deps --no-build-isolation -q -w "$WORK/wheels" "$WORK/src"
WHEEL="$(ls "$WORK"/wheels/intellect_protocol-*.whl)"
grep -oE '^[A-Za-z0-9][A-Za-z0-9._-]*==[^ \\;]+' "$ROOT/requirements.lock" > "$WORK/pins.txt"
# the role's Python packages, fetched here by pip (this host's pip settings) into a wheelhouse; the image's pip then
# installs offline from it (--no-index): nothing of this host's network setup goes into the image
if [[ "$ROLE" != relay ]]; then
  "$PYTHON" -m pip download -q --disable-pip-version-check --only-binary=:all: -d "$WORK/wheelhouse" \
    ${TORCH_INDEX:+--index-url "$TORCH_INDEX"} "torch==2.13.0"
fi
# `pip wheel`, not `download --only-binary`: a few pins exist as sources only (the model roles' reasoning-gym needs
# cellpylib, zss and pycosat, a C extension: gcc and Python 3.11's headers); they are built into wheels on this host
"$PYTHON" -m pip wheel -q --disable-pip-version-check --prefer-binary --find-links "$WORK/wheelhouse" \
  -w "$WORK/wheelhouse" -c "$WORK/pins.txt" "$WHEEL[$ROLE]"
RFS="$OUT/rootfs"
INCLUDE=python3,python3-venv,ca-certificates
BASE="$OUT/base-bookworm-python3.tar"  # Debian minbase + python3: built once, reused for every role
if [[ "${SYSTEMD:-0}" == 1 ]]; then
  INCLUDE="$INCLUDE,systemd,systemd-sysv,dbus"
  BASE="$OUT/base-bookworm-python3-systemd.tar"
fi
if [[ ! -f "$BASE" ]]; then
  mmdebstrap --variant=minbase --include="$INCLUDE" --mode=root bookworm "$OUT/.base.partial.tar"
  mv "$OUT/.base.partial.tar" "$BASE"
fi
rm -rf "$RFS"
mkdir -p "$RFS"
tar -C "$RFS" -xf "$BASE"
mkdir -p "$RFS/tmp/intellect"
cp -r "$WORK/wheelhouse" "$RFS/tmp/intellect/"
chroot "$RFS" python3 -m venv /opt/intellect/venv
chroot "$RFS" env PIP_CONFIG_FILE=/dev/null /opt/intellect/venv/bin/pip install -q --disable-pip-version-check \
  --no-compile --no-index --find-links /tmp/intellect/wheelhouse "intellect-protocol[$ROLE]"
rm -rf "$RFS/tmp/intellect" "$RFS/root/.cache"
if [[ "${SYSTEMD:-0}" == 1 ]]; then
  # the unit as shipped, enabled for this role; the console's getty off (a node has no login)
  chroot "$RFS" useradd --system --home-dir /var/lib/intellect --no-create-home --shell /usr/sbin/nologin intellect
  install -d "$RFS/etc/intellect"
  install -m 0644 "$ROOT/deploy/systemd/intellect-agent@.service" "$RFS/etc/systemd/system/"
  systemctl --root="$RFS" enable "intellect-agent@$ROLE.service"
  systemctl --root="$RFS" mask console-getty.service getty@tty1.service
  systemctl --root="$RFS" set-default multi-user.target
fi
if [[ "${TAR:-1}" == 1 ]]; then
  tar -C "$RFS" -cf "$OUT/intellect-$ROLE-rootfs.tar" .
  echo "$OUT/intellect-$ROLE-rootfs.tar"
else
  echo "$RFS"
fi
