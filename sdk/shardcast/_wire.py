"""Wire constants shared by the server and the downloaders (kept import-light: a `fetch`
process should not load the HTTP server to learn a URL prefix)."""

__all__ = ["API_PREFIX", "VERSIONS_SCHEMA"]

API_PREFIX = "/shardcast/v1"
VERSIONS_SCHEMA = "intellect.shardcast.versions/v1"
