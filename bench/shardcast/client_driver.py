"""A running client for the benchmarks: imports and sets up first, then fetches when told to,
the way a worker's long-running agent fetches each new checkpoint (`CheckpointFollower`).

    python bench/shardcast/client_driver.py OUT_DIR READY_FILE WORKERS RELAY_URL [RELAY_URL ...]
    INTELLECT_BENCH_BASE=DIR python bench/shardcast/client_driver.py ...   # fetch the delta against DIR

Writes READY_FILE once the client is constructed; then reads one line from stdin, the path of
the manifest (in a deployment the chain event names it), fetches it into OUT_DIR with the same
defaults as `intellect shardcast fetch` (WORKERS parallel shards, O_DIRECT, fsync, atomic install), prints a
JSON summary and exits.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from intellect.sdk.shardcast import Client, Manifest


def main() -> None:
    out, ready = Path(sys.argv[1]), Path(sys.argv[2])
    client = Client(sys.argv[4:], workers=int(sys.argv[3]))
    ready.write_text("ready")
    manifest = Manifest.from_bytes(Path(sys.stdin.readline().strip()).read_bytes())
    result = client.fetch_detailed(manifest, out, base=os.environ.get("INTELLECT_BENCH_BASE") or None)
    print(json.dumps({"path": str(result.path), "seconds": round(result.seconds, 3),
                      "downloaded_shards": result.downloaded_shards, "downloaded_bytes": result.downloaded_bytes,
                      "delta": result.delta, "delta_error": result.delta_error, "per_source": result.per_source}))


if __name__ == "__main__":
    main()
