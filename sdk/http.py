"""The SDK's bounded HTTP server, public: what the agents, Shardcast, the gateway, the dashboard and the tests
build their servers on (`HttpServer`, `JsonHandler`, `ServerLimits`; the implementation is `_http`), and
`parse_head`, the request-head reader its I/O thread runs on every request (fuzzed by `fuzz/`)."""

from intellect.sdk._http import HttpServer, JsonHandler, ServerLimits
from intellect.sdk._http import _parse_head as parse_head

__all__ = ["HttpServer", "JsonHandler", "ServerLimits", "parse_head"]
