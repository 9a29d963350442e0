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
from intellect.verifier.difficulty import table_file
from intellect.verifier.submission import Checkpoint

__all__ = ["MAX_DELTA_CHAIN", "CheckpointCache", "checkpoint_dir", "fetch_checkpoint", "held_steps", "load_checkpoint"]

log = logging.getLogger(__name__)


def checkpoint_dir(root: Path, step: int) -> Path:
    """Where checkpoint `step` is kept under `root`."""
    return root / f"step-{step}"


MAX_DELTA_CHAIN = 8
"""The most deltas a node applies to catch up (`fetch_checkpoint`); further behind, it fetches the checkpoint."""


def held_steps(root: Path) -> set[int]:
    """The steps whose checkpoints are complete under `root` (a fetch in progress has no config.json yet)."""
    return {int(p.name.split("-")[1]) for p in root.glob("step-*") if (p / "config.json").is_file()}


def fetch_checkpoint(cid: str, root: Path, step: int, *, sources: list[str], ipfs: Any,
                     reputation: SourceReputation, cid_of: Callable[[int], str] | None = None) -> FetchResult:
    """Fetch checkpoint `step` (manifest `cid`) into `checkpoint_dir(root, step)` from `sources` (relays, the
    manifest through `ipfs`), every shard sha256-checked. Only the changes when it can: the delta against the step
    the manifest's delta names when that step is held; a node further behind follows the deltas back (`cid_of`:
    a step's manifest CID, from the chain) to a step it holds, at most MAX_DELTA_CHAIN of them, and rebuilds each
    step in turn when that is fewer bytes (`Client.fetch_chain`); the full checkpoint otherwise. `reputation`
    benches a source that served corrupt shards, across fetches."""
    client = Client(relays=sources, ipfs=ipfs, fsync=False, reputation=reputation)
    out = checkpoint_dir(root, step)
    held = held_steps(root)
    target = client.resolve(cid)
    chain = [target]
    try:
        while (d := chain[0].delta) is not None and d.base_step not in held and len(chain) < MAX_DELTA_CHAIN \
                and cid_of is not None and d.base_step > max(held, default=d.base_step):
            chain.insert(0, client.resolve(cid_of(d.base_step)))
    except Exception as exc:  # a manifest on the way back not found: the checkpoint itself, as before
        log.info("checkpoint step %d: no delta chain from the steps held (%s); fetching it whole", step, exc)
        chain = [target]
    first = chain[0].delta
    if len(chain) > 1 and first is not None and first.base_step in held:
        return client.fetch_chain(chain, [checkpoint_dir(root, m.step) for m in chain],
                                  base=checkpoint_dir(root, first.base_step), overwrite=True)
    prev = checkpoint_dir(root, target.delta.base_step if target.delta is not None else step - 1)
    return client.fetch_detailed(target, out, base=prev if (prev / "config.json").is_file() else None)


def load_checkpoint(path: Path, cid: str, device: str, dtype: str) -> Checkpoint:
    """The model and tokenizer of the checkpoint directory `path` (manifest `cid`), in eval mode on `device` in
    torch dtype `dtype`, with the difficulty table published with it (an `adaptive` pool's problem weights)."""
    import torch  # deferred on purpose: a heavy optional dependency, loaded by the validator's first check
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype)).to(device).eval()
    return Checkpoint(model, AutoTokenizer.from_pretrained(str(path)), cid, table_file(path))


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
