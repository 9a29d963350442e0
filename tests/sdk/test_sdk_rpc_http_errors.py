"""An RPC URL whose server answers an HTTP error (a wrong provider key: 401; 403, 404, 5xx) is one line and exit
code 3 in the `intellect` CLI and in `intellect-agent`, never a traceback, and the line does not repeat the URL's
path or query (where providers put the API key). The server is a real HTTP server on a loopback port."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run_cli  # type: ignore[import-not-found]

from intellect.sdk import Protocol, RetryPolicy, RpcError

SECRET = "s3cr3t-api-key"


class _Answer(http.server.BaseHTTPRequestHandler):
    status = 401

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"error": "invalid api key"}'
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def http_rpc() -> Iterator[tuple[http.server.ThreadingHTTPServer, str]]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.status = 401  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server, f"http://127.0.0.1:{server.server_address[1]}/v2/{SECRET}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(("status", "words"), [(401, "API key"), (403, "refused access"), (404, "RPC URL")])
def test_cli_http_error_is_one_line_and_exit_3(http_rpc: tuple, status: int, words: str) -> None:
    server, url = http_rpc
    server.status = status
    code, out, err = run_cli(["--network", url, "pool", "show"])
    assert code == 3, (code, out, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert f"HTTP {status}" in lines[0] and words in lines[0]
    assert SECRET not in err and "Traceback" not in err


def test_5xx_is_retried_then_one_rpc_error(http_rpc: tuple) -> None:
    server, url = http_rpc
    server.status = 503
    with pytest.raises(RpcError, match="HTTP 503") as info:
        Protocol.connect(url, retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.01))
    assert SECRET not in str(info.value) and "after 2 attempts" in str(info.value)


def test_agent_http_401_is_one_line_and_exit_3(http_rpc: tuple, tmp_path: Path) -> None:
    _, url = http_rpc
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-m", "intellect.agents.cli", "--role", "validator",
                          "--set", f"chain.rpc_url={url}", "--set", "chain.dev_account=2",
                          "--set", f"data_dir={tmp_path / 'v'}"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 3, out.stderr[-2000:]
    errors = [ln for ln in out.stderr.splitlines() if " ERROR " in ln]
    assert len(errors) == 1 and "HTTP 401" in errors[0], out.stderr[-2000:]
    assert "Traceback" not in out.stderr and SECRET not in out.stderr


def test_a_refused_connection_does_not_repeat_the_urls_path(tmp_path: Path) -> None:
    from intellect.sdk.procs import free_port

    url = f"http://127.0.0.1:{free_port()}/v2/{SECRET}"  # nothing listens there
    with pytest.raises(RpcError, match="connection refused") as info:
        Protocol.connect(url, retry=RetryPolicy(attempts=2, base_delay=0.01, max_delay=0.01))
    assert SECRET not in str(info.value)
