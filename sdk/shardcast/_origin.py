"""The origin: turns a checkpoint directory into shards + manifest and serves them."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, runtime_checkable

from .._http import ServerLimits
from . import _zstd
from ._delta import DEFAULT_LEVEL, DeltaError, DeltaStats, encode_delta
from ._errors import ManifestError, ShardcastError
from ._manifest import DeltaInfo, FileDigest, FileEntry, Manifest, ShardEntry, checkpoint_files, now_utc
from ._server import ShardServer
from ._store import ShardStore, VersionState

__all__ = ["DEFAULT_SHARD_SIZE", "IpfsLike", "Origin", "build_shards"]

log = logging.getLogger(__name__)

DEFAULT_SHARD_SIZE = 50 * 1000 * 1000  # 50 MB, like INTELLECT-2's shardcast
_READ = 8 * 1024 * 1024


@runtime_checkable
class IpfsLike(Protocol):
    """What Shardcast needs from an IPFS client (`intellect.sdk.ipfs.IpfsClient` fits)."""

    def add(self, data: bytes, *, pin: bool = True) -> str: ...
    def cat(self, cid: str, *, max_size: int) -> bytes: ...


def build_shards(
    checkpoint_dir: Path | str,
    out_dir: Path | str,
    *,
    step: int,
    model_name: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
    relay_hints: Sequence[str] = (),
) -> Manifest:
    """Cut `checkpoint_dir` into shard files `out_dir/<i>` and return the manifest.

    One read pass: each chunk goes to the shard file and its sha256 on this thread, and to
    the whole-stream sha256 on a second thread (hashlib releases the GIL), so publishing
    costs about one sha256 pass of wall time.
    """
    src = Path(checkpoint_dir)
    if not src.is_dir():
        raise ShardcastError(f"checkpoint directory {src} does not exist")
    if shard_size <= 0:
        raise ValueError("shard_size must be positive")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = checkpoint_files(src)
    if not files:
        raise ManifestError(f"checkpoint directory {src} holds no files")

    entries: list[FileEntry] = []
    shards: list[ShardEntry] = []
    total = hashlib.sha256()
    pos = 0
    shard_h = hashlib.sha256()
    shard_start = 0
    shard_fd: int | None = None
    pending: Future[None] | None = None

    def close_shard() -> None:
        nonlocal shard_fd, shard_h, shard_start
        assert shard_fd is not None
        os.close(shard_fd)
        shards.append(ShardEntry(index=len(shards), offset=shard_start, size=pos - shard_start,
                                 sha256=shard_h.hexdigest()))
        shard_fd, shard_h, shard_start = None, hashlib.sha256(), pos

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="shardcast-total") as hasher:
        for rel, path in files:
            size = path.stat().st_size
            entries.append(FileEntry(path=rel, offset=pos, size=size))
            with open(path, "rb") as f:
                left = size
                while left > 0:
                    if shard_fd is None:
                        shard_fd = os.open(out / str(len(shards)), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                    room = shard_size - (pos - shard_start)
                    chunk = f.read(min(_READ, room, left))
                    if not chunk:
                        raise ShardcastError(f"{path} shrank while being read")
                    if pending is not None:
                        pending.result()  # keep at most one chunk in flight: bounded memory
                    pending = hasher.submit(total.update, chunk)
                    shard_h.update(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(shard_fd, view):]
                    pos += len(chunk)
                    left -= len(chunk)
                    if pos - shard_start == shard_size:
                        close_shard()
        if shard_fd is not None:
            close_shard()
        if pending is not None:
            pending.result()
    root = hashlib.sha256(b"".join(bytes.fromhex(s.sha256) for s in shards)).hexdigest()
    return Manifest(model_name=model_name, step=step, created_at=now_utc(), shard_size=shard_size,
                    total_size=pos, files=entries, shards=shards, total_sha256=total.hexdigest(),
                    root_sha256=root, relay_hints=list(relay_hints))


class Origin:
    """Publishes checkpoints: shards them into `data_dir`, serves them over HTTP, and puts the
    manifest on IPFS when an IPFS client is given.

        origin = Origin("/var/shardcast/origin", ipfs=ipfs, port=8600).start()
        manifest, cid = origin.publish("ckpt/step-12", step=12, model_name="qwen-tiny")
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        ipfs: IpfsLike | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        keep: int | None = 3,
        shard_size: int = DEFAULT_SHARD_SIZE,
        relay_hints: Sequence[str] = (),
        max_rate: int | None = None,
        limits: ServerLimits | None = None,
        delta: bool = True,
        delta_level: int = DEFAULT_LEVEL,
        delta_threads: int = 2,
        delta_encoder: Callable[..., tuple[bytes, DeltaStats]] = encode_delta,
    ) -> None:
        """delta: publish each checkpoint also as a change against the previous version this origin
        published of the same model (`intellect.ckdelta/v1`, docs/shardcast.md "Deltas");
        delta_level: its zstd level; delta_threads: streams compressed in parallel; delta_encoder: the
        encoder (`encode_delta`'s signature; the manifest names the encoding its stats report)."""
        self.delta = delta
        self.delta_encoder = delta_encoder
        self.delta_level = delta_level
        self.delta_threads = delta_threads
        self.last_delta_stats: dict[str, float | int | str] | None = None
        self.data_dir = Path(data_dir)
        self.ipfs = ipfs
        self.shard_size = shard_size
        self.relay_hints = list(relay_hints)
        self.store = ShardStore(self.data_dir, keep=keep)
        for leftover in self.data_dir.glob("staging-*"):  # a publish interrupted by a crash
            shutil.rmtree(leftover, ignore_errors=True)
        self.server = ShardServer(self.store, host=host, port=port, role="origin", max_rate=max_rate, limits=limits)

    @property
    def url(self) -> str:
        return self.server.url

    def start(self) -> Origin:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def __enter__(self) -> Origin:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def publish(self, checkpoint_dir: Path | str, step: int, model_name: str) -> tuple[Manifest, str | None]:
        """Shard and serve `checkpoint_dir`; returns (manifest, manifest CID or None without IPFS).

        Relays long-polling this origin learn of the new version as soon as this returns.
        """
        staging = self.data_dir / f"staging-{uuid.uuid4().hex}"
        try:
            manifest = build_shards(checkpoint_dir, staging / "shards", step=step, model_name=model_name,
                                    shard_size=self.shard_size, relay_hints=self.relay_hints)
            base = self._delta_base(model_name, step) if self.delta else None
            if base is not None:
                try:
                    manifest = self._add_delta(manifest, Path(checkpoint_dir), base, staging / "shards")
                except Exception as e:  # a delta is an optimisation: the full checkpoint still goes out
                    log.warning("step %d published without a delta: %s: %s", step, type(e).__name__, e,
                                exc_info=not isinstance(e, DeltaError | _zstd.ZstdError | OSError))
            final = self.data_dir / "versions" / manifest.id
            if final.exists():
                shutil.rmtree(staging)
            else:
                staging.rename(final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        cid = self.ipfs.add(manifest.to_bytes(), pin=True) if self.ipfs is not None else None
        self.store.add_version(manifest, present={s.index for s in manifest.all_shards()})
        log.info("published %s step %d: %d bytes in %d shards, manifest %s cid %s", model_name, step,
                 manifest.total_size, len(manifest.shards), manifest.id[:12], cid)
        return manifest, cid

    # -- deltas ------------------------------------------------------------------------------------

    def _delta_base(self, model_name: str, step: int) -> VersionState | None:
        """The newest complete version of `model_name` before `step` this origin holds (the previous
        publish), or None."""
        for st in reversed(self.store.versions()):
            m = st.manifest
            if m.model_name == model_name and m.step < step and st.complete and not st.removed:
                return st
        return None

    def _add_delta(self, manifest: Manifest, checkpoint_dir: Path, base: VersionState, shard_dir: Path) -> Manifest:
        """`manifest` with a delta against `base` whose shards are written into `shard_dir`; the
        manifest unchanged when the delta would not be smaller than the checkpoint."""
        target = [(f.path, (checkpoint_dir / f.path).read_bytes()) for f in manifest.files]
        total = hashlib.sha256()
        for _, data in target:
            total.update(data)
        if total.hexdigest() != manifest.total_sha256:
            raise DeltaError(f"{checkpoint_dir} changed while it was being published")
        base_files = read_version_files(base)
        payload, stats = self.delta_encoder(base_files, target, base_manifest_id=base.manifest.id,
                                      level=self.delta_level, threads=self.delta_threads)
        self.last_delta_stats = {"base_step": base.manifest.step, "step": manifest.step, "bytes": stats.payload_bytes,
                                 "full_bytes": manifest.total_size, "encode_s": round(stats.seconds, 3)}
        if stats.payload_bytes >= manifest.total_size:
            log.info("step %d: delta (%d bytes) not smaller than the checkpoint: published without one",
                     manifest.step, stats.payload_bytes)
            return manifest
        shards: list[ShardEntry] = []
        first = len(manifest.shards)
        view = memoryview(payload)
        for j, off in enumerate(range(0, len(payload), manifest.shard_size)):
            piece = view[off : off + manifest.shard_size]
            (shard_dir / str(first + j)).write_bytes(piece)
            shards.append(ShardEntry(index=first + j, offset=off, size=len(piece),
                                     sha256=hashlib.sha256(piece).hexdigest()))
        info = DeltaInfo(
            encoding=stats.encoding, base_step=base.manifest.step, base_manifest_id=base.manifest.id,
            base_files=[FileDigest(path=p, size=len(d), sha256=hashlib.sha256(d).hexdigest())
                        for p, d in base_files.items()],
            files=[FileDigest(path=p, size=len(d), sha256=hashlib.sha256(d).hexdigest()) for p, d in target],
            size=len(payload), shards=shards)
        log.info("step %d: delta against step %d is %d bytes (%.2f %% of %d), encoded in %.2f s", manifest.step,
                 base.manifest.step, len(payload), 100 * len(payload) / max(1, manifest.total_size),
                 manifest.total_size, stats.seconds)
        return Manifest.model_validate({**manifest.model_dump(by_alias=True), "delta": info.model_dump()})


def read_version_files(st: VersionState) -> dict[str, bytes]:
    """The files of a stored version, reassembled from its verified shard files (the bytes clients got)."""
    m = st.manifest
    out: dict[str, bytes] = {}
    for f in m.files:
        buf = bytearray(f.size)
        for shard in m.shards:
            lo, hi = max(shard.offset, f.offset), min(shard.offset + shard.size, f.offset + f.size)
            if lo >= hi:
                continue
            with open(st.shard_path(shard.index), "rb") as fh:
                fh.seek(lo - shard.offset)
                n = fh.readinto(memoryview(buf)[lo - f.offset : hi - f.offset])
            if n != hi - lo:
                raise DeltaError(f"shard {shard.index} of version {m.id[:12]} is short")
        out[f.path] = bytes(buf)
    return out
