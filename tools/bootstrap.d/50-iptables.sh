#!/usr/bin/env bash
# Debian's iptables: the NAT router of the multi-host tests (tests/net/net_hosts.py `NetLab.nat_host`: a router
# namespace masquerading for a host behind it). Nothing else uses it; without it those tests skip, saying why.
# Idempotent: returns at once when iptables is installed. Needs root (apt-get); otherwise prints how to install it.
set -euo pipefail
if command -v iptables >/dev/null 2>&1; then
  exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' \
    "iptables is not installed and this is not root: run 'sudo apt-get update && sudo apt-get install -y iptables' for the NAT tests (they skip until then)" >&2
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  printf '\033[1;33m[bootstrap]\033[0m %s\n' "no apt-get: install iptables with this system's package manager for the NAT tests (they skip until then)" >&2
  exit 0
fi
printf '\033[1;34m[bootstrap]\033[0m %s\n' "installing Debian iptables (the NAT router of tests/net)" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends iptables >/dev/null
command -v iptables >/dev/null 2>&1 || { echo "iptables missing after apt-get install iptables" >&2; exit 1; }
