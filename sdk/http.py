"""The SDK's bounded HTTP, public: the server base the agents, Shardcast, the gateway, the dashboard and the
tests build their servers on (`HttpServer`, `JsonHandler`, `ServerLimits`; the implementation is `_http`) with
`parse_head`, the request-head reader its I/O thread runs on every request (fuzzed by `fuzz/`), and the
product's one HTTP client, `fetch` (a total deadline and a byte cap on every exchange with a stranger; errors
`PeerHttpError` and its `PeerDeadlineError`; the implementation is `_fetch`)."""

from intellect.sdk._fetch import DEFAULT_MAX_BYTES, PeerDeadlineError, PeerHttpError, Reply, SocketCut, fetch
from intellect.sdk._http import HttpServer, JsonHandler, ServerLimits
from intellect.sdk._http import _parse_head as parse_head

__all__ = ["DEFAULT_MAX_BYTES", "HttpServer", "JsonHandler", "PeerDeadlineError", "PeerHttpError", "Reply",
           "ServerLimits", "SocketCut", "fetch", "parse_head"]
