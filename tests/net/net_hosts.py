"""Hosts made of Linux network namespaces: one LAN (a bridge in its own namespace), one veth pair per
host, an address per host in a 10.77.N.0/24 of its own (N free on this machine: two labs at once never
share a subnet), and the test process itself on the LAN as `10.77.N.254` (a veth into the bridge) so it
can read every agent's /status.

    lab = NetLab.create()                  # raises NetUnavailable (why) where namespaces are not permitted
    chain = lab.host("chain")              # 10.77.N.1, `ip netns exec <ns> ...` via chain.cmd([...])
    lab.cap("w1", "20mbit")                # tbf on both ends of its link: a home-broadband uplink/downlink
    lab.cut("relay")                       # the host's cable pulled: its link deleted mid-whatever
    lab.close()                            # every namespace (and with them every veth) deleted

Names are `ipn-<pid>-<n>-<host>`: unique per process, found and removed by `close()` even after a
failure. Traffic only ever goes to these namespaces' own addresses. This kernel has no netem (and no
tc action modules or netfilter tools here): a host "behind NAT" is one whose services listen only on
its own loopback (no inbound connection can reach it) and which advertises nothing (server.advertise).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from dataclasses import dataclass, field

__all__ = ["Host", "NetLab", "NetUnavailable"]

_COUNTER = itertools.count()


def _free_subnet() -> str:
    """A 10.77.N prefix no interface of this (root) namespace is on: each lab's LAN is its own /24."""
    used = subprocess.run(["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, timeout=20).stdout
    start = os.getpid() % 250
    for k in range(250):
        n = (start + k) % 250 + 1
        if f" 10.77.{n}." not in used:
            return f"10.77.{n}"
    raise NetUnavailable("every 10.77.N.0/24 is taken by another lab")


class NetUnavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no `ip`, a sandbox without CAP_NET_ADMIN)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


@dataclass
class Host:
    name: str
    ns: str
    addr: str
    dev: str  # the host's end of its veth (inside `ns`)
    hub_dev: str  # the LAN's end (inside the bridge namespace); "" behind a NAT router
    router: Host | None = None  # the NAT router a `nat_host` reaches the LAN through

    def cmd(self, argv: list[str]) -> list[str]:
        """`argv` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.ns, *argv]


@dataclass
class NetLab:
    prefix: str
    hub_ns: str
    subnet: str  # "10.77.N": hosts .1 ... .200, the test process .254
    hosts: dict[str, Host] = field(default_factory=dict)
    tester_dev: str = ""
    _namespaces: list[str] = field(default_factory=list)

    @classmethod
    def create(cls) -> NetLab:
        if shutil.which("ip") is None:
            raise NetUnavailable("`ip` (iproute2) is not installed")
        if os.geteuid() != 0:
            raise NetUnavailable("network namespaces need root (CAP_NET_ADMIN); run as root to include tests/net")
        prefix = f"ipn-{os.getpid()}-{next(_COUNTER)}"
        lab = cls(prefix=prefix, hub_ns=f"{prefix}-hub", subnet=_free_subnet())
        try:
            lab._add_ns(lab.hub_ns)
            _ip("-n", lab.hub_ns, "link", "add", "br0", "type", "bridge")
            _ip("-n", lab.hub_ns, "link", "set", "br0", "up")
            # the test process joins the LAN as .254: a veth whose other end is on the bridge
            lab.tester_dev = f"ipt{os.getpid() % 100000}x{len(lab._namespaces)}"[:15]
            _ip("link", "add", lab.tester_dev, "type", "veth", "peer", "name", "hub-tester", "netns", lab.hub_ns)
            _ip("-n", lab.hub_ns, "link", "set", "hub-tester", "master", "br0", "up")
            _ip("addr", "add", f"{lab.subnet}.254/24", "dev", lab.tester_dev)
            _ip("link", "set", lab.tester_dev, "up")
        except subprocess.CalledProcessError as exc:
            lab.close()
            raise NetUnavailable(f"cannot make network namespaces here: {' '.join(exc.cmd)}: "
                                 f"{(exc.stderr or '').strip()}") from None
        return lab

    def _add_ns(self, ns: str) -> None:
        self._namespaces.append(ns)  # recorded first: close() removes it even if the next step fails
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")

    def host(self, name: str) -> Host:
        """A new host on the LAN (addresses handed out in order from .1)."""
        n = len(self.hosts) + 1
        if n > 200:
            raise ValueError("at most 200 hosts per lab")
        ns = f"{self.prefix}-{name}"
        self._add_ns(ns)
        h = Host(name=name, ns=ns, addr=f"{self.subnet}.{n}", dev="eth0", hub_dev=f"h{n}")
        _ip("-n", self.hub_ns, "link", "add", h.hub_dev, "type", "veth", "peer", "name", h.dev, "netns", ns)
        _ip("-n", self.hub_ns, "link", "set", h.hub_dev, "master", "br0", "up")
        _ip("-n", ns, "addr", "add", f"{h.addr}/24", "dev", h.dev)
        _ip("-n", ns, "link", "set", h.dev, "up")
        self.hosts[name] = h
        return h

    def nat_host(self, name: str) -> Host:
        """A host behind a real NAT router: the router `<name>-gw` is a LAN host (its address is the one the
        others see) masquerading (`iptables -t nat ... MASQUERADE`) for a private link to `name` (10.78.N.2, default
        route via the router). `name` reaches every LAN host; no LAN host has a route to it. Needs Debian's
        `iptables` (tools/bootstrap.d/50-iptables.sh); NetUnavailable, saying so, without it."""
        if shutil.which("iptables") is None:
            raise NetUnavailable("a NAT router needs iptables (Debian's `iptables`: tools/bootstrap.d/50-iptables.sh)")
        router = self.host(f"{name}-gw")
        k = sum(1 for h in self.hosts.values() if h.name.endswith("-gw"))  # this router's number, from 1
        private = f"10.{77 + k}.{self.subnet.rsplit('.', 1)[1]}"
        ns = f"{self.prefix}-{name}"
        self._add_ns(ns)
        h = Host(name=name, ns=ns, addr=f"{private}.2", dev="eth0", hub_dev="")
        _ip("-n", router.ns, "link", "add", "home0", "type", "veth", "peer", "name", h.dev, "netns", ns)
        _ip("-n", router.ns, "addr", "add", f"{private}.1/24", "dev", "home0")
        _ip("-n", router.ns, "link", "set", "home0", "up")
        _ip("-n", ns, "addr", "add", f"{h.addr}/24", "dev", h.dev)
        _ip("-n", ns, "link", "set", h.dev, "up")
        _ip("-n", ns, "route", "add", "default", "via", f"{private}.1")
        for argv in (["sysctl", "-q", "-w", "net.ipv4.ip_forward=1"],
                     ["iptables", "-t", "nat", "-A", "POSTROUTING", "-o", router.dev, "-j", "MASQUERADE"]):
            subprocess.run(router.cmd(argv), check=True, capture_output=True, timeout=20)
        h.router = router
        self.hosts[name] = h
        return h

    def cap(self, name: str, rate: str, burst: str = "64kb", latency: str = "200ms") -> None:
        """Cap the host's link in both directions with a token bucket (`tc qdisc ... tbf`)."""
        h = self.hosts[name]
        for ns, dev in ((h.ns, h.dev), (self.hub_ns, h.hub_dev)):
            subprocess.run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate,
                            "burst", burst, "latency", latency], check=True, capture_output=True, timeout=20)

    def cut(self, name: str) -> None:
        """Pull the host's cable: its link goes away (connections to and from it stall, then fail)."""
        _ip("-n", self.hub_ns, "link", "del", self.hosts[name].hub_dev, check=False)

    def close(self) -> None:
        """Delete every namespace this lab made (their veths go with them); safe to call twice."""
        if self.tester_dev:
            _ip("link", "del", self.tester_dev, check=False)
            self.tester_dev = ""
        for ns in reversed(self._namespaces):
            _ip("netns", "del", ns, check=False)
        self._namespaces.clear()

    def __enter__(self) -> NetLab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
