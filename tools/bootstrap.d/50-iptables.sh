#!/usr/bin/env bash
# Debian's iptables: the NAT router of the multi-host tests (tests/net/net_hosts.py `NetLab.nat_host`: a router
# namespace masquerading for a host behind it). Nothing else uses it. Idempotent; without it those tests skip.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../bootstrap-apt.sh"
apt_step iptables 'command -v iptables >/dev/null 2>&1' "the NAT router of tests/net" "the NAT tests skip until then"
