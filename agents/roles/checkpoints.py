"""Policy checkpoints on a node: fetched from the pool's Shardcast tree and kept as `<root>/step-<n>` directories
(`fetch_checkpoint`, used by the worker's follower and the validator), and the validator's few loaded ones
(`CheckpointCache`: the newest `cached_checkpoints` models in memory, the newest published one preloaded in the
background so the first submission of a step does not wait for it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intellect.sdk.shardcast import Client, FetchResult, SourceReputation
from intellect.verifier.submission import Checkpoint

__all__ = ["CheckpointCache", "checkpoint_dir", "fetch_checkpoint", "load_checkpoint"]

log = logging.getLogger(__name__)


def checkpoint_dir(root: Path, step: int) -> Path:
    """Where checkpoint `step` is kept under `root`."""
    return root / f"step-{step}"


def fetch_checkpoint(cid: str, root: Path, step: int, *, sources: list[str], ipfs: Any,
                     reputation: SourceReputation) -> FetchResult:
    """Fetch checkpoint `step` (manifest `cid`) into `checkpoint_dir(root, step)` from `sources` (relays, the
    manifest through `ipfs`), every shard sha256-checked; only the change against step − 1 when that one is held
    (the full checkpoint otherwise). `reputation` benches a source that served corrupt shards, across fetches."""
    prev = checkpoint_dir(root, step - 1)
    return Client(relays=sources, ipfs=ipfs, fsync=False, reputation=reputation).fetch_detailed(
        cid, checkpoint_dir(root, step), base=prev if (prev / "config.json").is_file() else None)


def load_checkpoint(path: Path, cid: str, device: str, dtype: str) -> Checkpoint:
    """The model and tokenizer of the checkpoint directory `path` (manifest `cid`), in eval mode on `device` in
    torch dtype `dtype`."""
    import torch  # deferred on purpose: a heavy optional dependency, loaded by the validator's first check
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype)).to(device).eval()
    return Checkpoint(model, AutoTokenizer.from_pretrained(str(path)), cid)


class CheckpointCache:
    """The newest `size` loaded checkpoints, by step (least recently used dropped first); one load at a time."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.reputation = SourceReputation()  # relays that served corrupt shards stay benched across fetches
        self._models: OrderedDict[int, Checkpoint] = OrderedDict()
        self._lock = threading.Lock()
        self._preloaded = -1
        self._preloader: threading.Thread | None = None

    def get(self, step: int, load: Callable[[int], Checkpoint]) -> Checkpoint:
        """Checkpoint `step`, loaded by `load(step)` (under the cache's lock) when not held."""
        with self._lock:
            if step in self._models:
                self._models.move_to_end(step)
                return self._models[step]
            self._models[step] = load(step)
            while len(self._models) > self.size:
                self._models.popitem(last=False)
            return self._models[step]

    def preload(self, step: int, get: Callable[[int], Any], on_error: Callable[[Exception], Any]) -> None:
        """Run `get(step)` in a background thread unless `step` was preloaded already or a preload is running; a
        failure goes to `on_error` and is tried again on the next call."""
        if step <= self._preloaded or (self._preloader is not None and self._preloader.is_alive()):
            return

        def run() -> None:
            t0 = time.perf_counter()
            try:
                get(step)
                log.info("preloaded checkpoint step %d in %.2fs", step, time.perf_counter() - t0)
                self._preloaded = step
            except Exception as exc:  # retried on the next loop turn; verification loads it anyway
                on_error(exc)
                log.warning("preloading checkpoint step %d failed: %r", step, exc)

        self._preloader = threading.Thread(target=run, name="preload", daemon=True)
        self._preloader.start()
