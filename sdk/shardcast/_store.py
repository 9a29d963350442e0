"""On-disk store of versions and shards, shared by the origin and the relays.

Layout under `data_dir`::

    versions/<manifest id>/manifest.json     canonical manifest bytes
    versions/<manifest id>/shards/<i>        shard i, present only once verified
    versions/<manifest id>/shards/<i>.part   a shard being downloaded (never served)

A shard file appears by an atomic rename after its hash was checked, so presence means
verified, also after a restart. A relay with a RAM arena (`_arena`) may hold a verified shard
only in memory (`VersionState.ram`) until it writes it behind; such a shard is present but has
no file yet, and is lost (fetched again) if the relay restarts first. Waiters (long-polls,
pending shard requests) block on one condition variable that every change notifies.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ._arena import Arena, Slot
from ._errors import ManifestError
from ._manifest import Manifest

__all__ = ["ShardStore", "VersionState"]

log = logging.getLogger(__name__)


@dataclass
class VersionState:
    manifest: Manifest
    directory: Path
    present: set[int] = field(default_factory=set)
    added_at: float = field(default_factory=time.time)
    removed: bool = False
    ram: dict[int, Slot] = field(default_factory=dict)  # shards held in the store's arena

    @property
    def complete(self) -> bool:
        return len(self.present) == self.manifest.shard_count

    def shard_path(self, index: int) -> Path:
        return self.directory / "shards" / str(index)


class ShardStore:
    """Thread-safe index of the versions held on disk, keeping at most `keep` of them."""

    def __init__(self, data_dir: Path | str, *, keep: int | None = None, arena: Arena | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError("keep must be >= 1 (or None for unlimited)")
        self.data_dir = Path(data_dir)
        self.keep = keep
        self.arena = arena
        self._versions: OrderedDict[str, VersionState] = OrderedDict()
        self._cond = threading.Condition()
        self._generation = 0  # bumps on every new version (long-poll cursor)
        (self.data_dir / "versions").mkdir(parents=True, exist_ok=True)
        self._load()

    # -- reading -------------------------------------------------------------------------------

    def get(self, version_id: str) -> VersionState | None:
        with self._cond:
            return self._versions.get(version_id)

    def versions(self) -> list[VersionState]:
        with self._cond:
            return list(self._versions.values())

    def latest_id(self) -> str | None:
        with self._cond:
            return next(reversed(self._versions), None) if self._versions else None

    def wait_for_change(self, after: str | None, timeout: float) -> list[VersionState]:
        """Long-poll: return as soon as the latest version differs from `after` (or on timeout).

        `after=None` means "I know of no version": an empty store holds the request until its
        first version arrives, so a relay started before the origin's first publish learns of it
        at once instead of re-polling.
        """
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.latest_id() == after:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            return list(self._versions.values())

    def wait_for_version(self, version_id: str, timeout: float) -> VersionState | None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while version_id not in self._versions:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)
            return self._versions[version_id]

    def wait_for_shard(self, version_id: str, index: int, timeout: float) -> Path | None:
        """Path of a verified shard, waiting up to `timeout` for it to arrive; None if it did not."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                st = self._versions.get(version_id)
                if st is not None and index in st.present:
                    return st.shard_path(index)
                if st is not None and st.removed:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._cond.wait(left)

    # -- writing -------------------------------------------------------------------------------

    def add_version(self, manifest: Manifest, *, present: set[int] | None = None) -> VersionState:
        """Register a version (idempotent); writes its manifest and prunes beyond `keep`."""
        vid = manifest.id
        with self._cond:
            st = self._versions.get(vid)
            if st is not None:
                return st
        directory = self.data_dir / "versions" / vid
        (directory / "shards").mkdir(parents=True, exist_ok=True)
        tmp = directory / "manifest.json.tmp"
        tmp.write_bytes(manifest.to_bytes())
        tmp.replace(directory / "manifest.json")
        with self._cond:
            st = self._versions.get(vid)
            if st is None:
                st = VersionState(manifest, directory, set(present or ()))
                self._versions[vid] = st
                self._generation += 1
                self._prune_locked()
                self._cond.notify_all()
        log.info("version %s (model %s, step %d, %d shards) registered", vid[:12], manifest.model_name,
                 manifest.step, len(manifest.shards))
        return st

    def mark_present(self, version_id: str, index: int, *, slot: Slot | None = None) -> None:
        """Shard `index` is verified: on disk, or in the arena at `slot`."""
        release = None
        with self._cond:
            st = self._versions.get(version_id)
            if st is not None and not st.removed:
                if slot is not None:
                    st.ram[index] = slot
                st.present.add(index)
                self._cond.notify_all()
            else:
                release = slot
        if release is not None and self.arena is not None:
            self.arena.release(release)

    def unpersisted(self) -> list[tuple[VersionState, int, Slot]]:
        """Arena-held shards with no file yet, oldest version first (what a write-behind owes)."""
        with self._cond:
            return [(st, i, slot) for st in self._versions.values() if not st.removed
                    for i, slot in sorted(st.ram.items()) if not slot.persisted]

    def mark_persisted(self, version_id: str, index: int) -> None:
        with self._cond:
            st = self._versions.get(version_id)
            slot = st.ram.get(index) if st is not None else None
            if slot is not None:
                slot.persisted = True

    def reclaim(self, exclude: str | None = None) -> int:
        """Drop every shard that is already on disk from RAM, except version `exclude`'s (the one
        being received); returns how many slots were released. They stay served from their files."""
        if self.arena is None:
            return 0
        dropped = 0
        # released inside the lock: a concurrent reclaim that finds nothing left to drop finds the room freed
        with self._cond:
            for vid, st in self._versions.items():
                if vid == exclude:
                    continue
                for i in [i for i, s in st.ram.items() if s.persisted]:
                    self.arena.release(st.ram.pop(i))
                    dropped += 1
        return dropped

    def _prune_locked(self) -> None:
        if self.keep is None:
            return
        while len(self._versions) > self.keep:
            vid, st = self._versions.popitem(last=False)
            st.removed = True
            if self.arena is not None:
                for slot in st.ram.values():  # in-flight sends keep a slot until they drain
                    self.arena.release(slot)
                st.ram.clear()
            log.info("dropping version %s (step %d): keeping the last %d", vid[:12], st.manifest.step, self.keep)
            # Open file descriptors keep serving in-flight responses; new requests get 404.
            shutil.rmtree(st.directory, ignore_errors=True)

    def _load(self) -> None:
        """Re-index versions left on disk by a previous run (oldest first, by manifest mtime)."""
        root = self.data_dir / "versions"
        found: list[tuple[float, VersionState]] = []
        for d in root.iterdir():
            mf = d / "manifest.json"
            if not mf.is_file():
                shutil.rmtree(d, ignore_errors=True)
                continue
            try:
                manifest = Manifest.from_bytes(mf.read_bytes())
            except ManifestError as e:
                log.warning("ignoring %s: %s", d, e)
                continue
            if manifest.id != d.name:
                log.warning("ignoring %s: manifest id %s does not match its directory", d, manifest.id)
                continue
            present = set()
            for s in manifest.all_shards():
                p = d / "shards" / str(s.index)
                if p.is_file() and p.stat().st_size == s.size:
                    present.add(s.index)
            for part in (d / "shards").glob("*.part"):
                part.unlink(missing_ok=True)
            found.append((mf.stat().st_mtime, VersionState(manifest, d, present)))
        for _, st in sorted(found, key=lambda t: t[0]):
            self._versions[st.manifest.id] = st
        self._prune_locked()
        if found:
            log.info("loaded %d version(s) from %s", len(self._versions), root)
