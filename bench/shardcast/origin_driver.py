"""An origin process for the benchmarks: starts serving an empty data dir, then publishes a
checkpoint when told to, the way a trainer's long-running origin does after each step.

    python bench/shardcast/origin_driver.py DATA_DIR CHECKPOINT_DIR URL_FILE GO_FILE MANIFEST_OUT SHARD_SIZE

Writes the origin's URL to URL_FILE once it serves; waits for GO_FILE to exist; publishes
CHECKPOINT_DIR (sharding + hashing) and then writes its manifest to MANIFEST_OUT (atomically: the
benchmark's clock starts when that file appears, the moment relays long-polling the origin learn
of the version); serves until SIGTERM.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

from intellect.sdk.shardcast import Origin


def main() -> None:
    data, ckpt, url_file, go, manifest_out = (Path(a) for a in sys.argv[1:6])
    shard_size = int(sys.argv[6])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    origin = Origin(data, shard_size=shard_size, keep=None).start()
    url_file.write_text(origin.url)
    while not go.exists() and not stop.is_set():
        time.sleep(0.002)
    manifest, _ = origin.publish(ckpt, step=1, model_name="bench")
    tmp = manifest_out.with_suffix(".tmp")
    tmp.write_bytes(manifest.to_bytes())
    tmp.rename(manifest_out)
    stop.wait()
    origin.stop()


if __name__ == "__main__":
    main()
