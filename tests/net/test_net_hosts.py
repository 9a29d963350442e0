"""The hosts harness itself (fast, default suite where namespaces are permitted): hosts reach each other
over the LAN, a host whose services listen on its loopback cannot be reached, a pulled cable cuts a host
off, and closing the lab leaves no namespace behind."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from net_hosts import NetUnavailable

SERVE = textwrap.dedent("""
    import sys
    from http.server import SimpleHTTPRequestHandler
    from intellect.sdk._http import HttpServer
    srv = HttpServer(SimpleHTTPRequestHandler, sys.argv[1], int(sys.argv[2])).start()
    print("ready", flush=True)
    sys.stdin.read()
""")
GET = ("import sys, urllib.request\nr = urllib.request.urlopen(sys.argv[1], timeout=10)\n"
       "n = len(r.read())\nprint(r.status)")


def _serve(host, bind: str, port: int) -> subprocess.Popen[str]:
    proc = subprocess.Popen(host.cmd([sys.executable, "-c", SERVE, bind, str(port)]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd="/tmp")
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _get_from(host, url: str) -> bool:
    r = subprocess.run(host.cmd([sys.executable, "-c", GET, url]), capture_output=True, text=True, timeout=30)
    return r.returncode == 0 and r.stdout.strip() == "200"


def test_hosts_reach_each_other_nat_host_is_unreachable_and_cut_host_is_gone(lab):
    a, b, nat = lab.host("a"), lab.host("b"), lab.host("nat")
    lab.cap("b", "20mbit")
    servers = [_serve(a, a.addr, 8000), _serve(nat, "127.0.0.1", 8000)]
    try:
        assert _get_from(b, f"http://{a.addr}:8000/")  # across the LAN, through b's capped link
        assert _get_from(nat, f"http://{a.addr}:8000/")  # the NAT'd host reaches out
        assert not _get_from(b, f"http://{nat.addr}:8000/")  # nothing reaches in
        with urllib.request.urlopen(f"http://{a.addr}:8000/", timeout=5) as resp:  # the test process is on the LAN
            assert resp.status == 200
        lab.cut("a")
        assert not _get_from(b, f"http://{a.addr}:8000/")
    finally:
        for p in servers:
            p.kill()
            p.wait(timeout=10)
    names = list(lab._namespaces)
    lab.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not [n for n in names if n in listed]


def test_tbf_cap_slows_a_transfer(lab, tmp_path):
    """A capped link moves a 4 MB body no faster than its rate allows (a floor, not a timing assertion)."""
    a, b = lab.host("a"), lab.host("b")
    lab.cap("b", "16mbit")
    (tmp_path / "blob").write_bytes(b"x" * 4_000_000)
    srv = subprocess.Popen(a.cmd([sys.executable, "-m", "http.server", "8000", "--bind", a.addr]), cwd=tmp_path,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _get_from(b, f"http://{a.addr}:8000/"):
            time.sleep(0.2)
        t0 = time.monotonic()
        assert _get_from(b, f"http://{a.addr}:8000/blob")
        took = time.monotonic() - t0
        # 4 MB = 32 Mbit over 16 Mbit/s: at least 2 s however fast the machine
        assert took >= 1.9, f"4 MB through a 16 Mbit/s cap in {took:.2f}s: the cap is not in force"
    finally:
        srv.kill()
        srv.wait(timeout=10)


SEEN = textwrap.dedent("""
    import sys
    from http.server import BaseHTTPRequestHandler
    from intellect.sdk._http import HttpServer
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = self.client_address[0].encode()
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
            self.wfile.write(body)
    HttpServer(H, sys.argv[1], int(sys.argv[2])).start()
    print("ready", flush=True)
    sys.stdin.read()
""")


def test_a_host_behind_a_real_nat_router_reaches_out_as_the_router_and_nothing_reaches_in(lab):
    a = lab.host("a")
    try:
        home = lab.nat_host("home")
    except NetUnavailable as exc:  # no iptables here
        pytest.skip(str(exc))
    seen = subprocess.Popen(a.cmd([sys.executable, "-c", SEEN, a.addr, "8000"]), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd="/tmp")
    inside = _serve(home, "0.0.0.0", 8000)  # listening on every address of its own: still unreachable
    try:
        assert seen.stdout is not None and seen.stdout.readline().strip() == "ready"
        got = subprocess.run(home.cmd([sys.executable, "-c", "import sys, urllib.request\n"
                                       "print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())",
                                       f"http://{a.addr}:8000/"]), capture_output=True, text=True, timeout=30)
        assert got.stdout.strip() == home.router.addr, got  # masqueraded: the LAN sees the router's address
        assert not _get_from(a, f"http://{home.addr}:8000/")  # no route in
        assert not _get_from(a, f"http://{home.router.addr}:8000/")  # and nothing forwarded from the router
        assert _get_from(home, f"http://{home.addr}:8000/")  # (it is up)
    finally:
        for p in (seen, inside):
            p.kill()
            p.wait(timeout=10)
