"""A plain HTTP server in a thread serving fixed pages (path -> bytes; 404 otherwise), shared by the test folders
(`tests/conftest.py` puts this folder on sys.path): a web server a test publishes a document on, as an operator
would (the network descriptor)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def serve_pages(host: str, pages: dict[str, bytes]) -> Iterator[str]:
    """Serve `pages` (read on each request: a test may change them) on `host` at a free port; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer((host, 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
