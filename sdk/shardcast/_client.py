"""The client: fetch a checkpoint from relays, verified, resumable, written atomically.

While a fetch runs, its state lives next to the output in a sidecar directory::

    <parent>/.<name>.shardcast/state.json   {"schema", "manifest_id"}
    <parent>/.<name>.shardcast/manifest.json
    <parent>/.<name>.shardcast/journal      one line per verified shard index
    <parent>/.<name>.shardcast/data/        the checkpoint files, written in place by offset

Shard bytes go straight to their final offsets in `data/` (no second copy). When every shard
and the whole are verified, the files are fsynced and `data/` is renamed to `<parent>/<name>`
in one step, so a reader sees either no checkpoint or all of it. After a crash, a rerun with the
same manifest re-hashes the shards the journal lists (cheap: local disk) and downloads only
the others.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import logging
import mmap
import os
import shutil
import sys
import threading
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ._delta import DELTA_SCHEMA, DeltaError, UnknownDeltaVersionError, decode_delta
from ._directio import ALIGN, DIRECT_MIN, DirectFile, preallocate
from ._download import SHARD_DEADLINE_SLACK_S, DownloadStats, SourcePool, SourceReputation, download_shards
from ._errors import FetchError, OutputExistsError, ShardcastError, UnknownSchemaVersionError
from ._manifest import MAX_MANIFEST_BYTES, FileDigest, Manifest, ShardEntry, safe_relpath
from ._origin import IpfsLike

__all__ = ["Client", "FetchResult", "Staging"]

log = logging.getLogger(__name__)

STATE_SCHEMA = "intellect.shardcast.fetch-state/v1"
_BUF = 8 * 1024 * 1024


def _load_sync_file_range() -> Callable[[int, int, int], None] | None:
    """`sync_file_range(fd, off, n, WAIT_BEFORE | WRITE | WAIT_AFTER)` from libc (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
    fn.restype = ctypes.c_int

    def sync_range(fd: int, offset: int, length: int) -> None:
        if fn(fd, offset, length, 7) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"sync_file_range: {os.strerror(err)}")

    return sync_range


_sync_file_range = _load_sync_file_range()


@dataclass
class FetchResult:
    """What a fetch did: where it wrote, how many shards were reused or downloaded."""

    path: Path
    manifest: Manifest
    resumed_shards: int
    downloaded_shards: int
    downloaded_bytes: int
    corrupt_dropped: int
    failures: int
    seconds: float
    per_source: dict[str, int]
    delta: bool = False
    """True when the checkpoint was rebuilt from its delta against a local base."""
    delta_error: str | None = None
    """Why a delta offered for this checkpoint was refused (then the full checkpoint was fetched)."""
    delta_steps: int = 0
    """How many deltas rebuilt it: 1 from the step before, more through a chain (`Client.fetch_chain`)."""


class Staging:
    """The checkpoint files being assembled, open for positional writes (O_DIRECT middles where
    the file system allows it with `direct`, see `_directio`): `pwrite(stream offset, bytes)` in any
    order and any chunking, `settle` a verified range, `sync_and_close`. `Client.fetch` writes through
    one; a downloader of its own (a `SourcePool` and another transport) can too."""

    def __init__(self, manifest: Manifest, root: Path, *, direct: bool = False) -> None:
        self.manifest = manifest
        self.root = root
        self._starts = [f.offset for f in manifest.files]
        self.files: list[DirectFile] = []
        root.mkdir(parents=True, exist_ok=True)
        real_root = root.resolve()
        try:
            for f in manifest.files:
                p = root / safe_relpath(f.path)
                # Belt and braces: the lexical check already refused '..' and absolute paths.
                if not p.resolve().is_relative_to(real_root):
                    raise ShardcastError(f"{f.path!r} resolves outside {root}")
                p.parent.mkdir(parents=True, exist_ok=True)
                df = DirectFile(p, os.O_RDWR | os.O_CREAT, direct=direct and f.size >= DIRECT_MIN)
                self.files.append(df)
                if os.fstat(df.fd).st_size != f.size:
                    os.ftruncate(df.fd, f.size)
                if df.direct:
                    preallocate(df.fd, f.size)
        except BaseException:
            self.close()
            raise

    @property
    def direct(self) -> bool:
        """Whether any file is being written with O_DIRECT."""
        return any(f.direct for f in self.files)

    def _spans(self, offset: int, length: int) -> list[tuple[int, int, int, int]]:
        """(file index, file offset, position in the span, length) covering stream bytes [offset, offset+length)."""
        out = []
        i = max(0, bisect_right(self._starts, offset) - 1)
        pos = 0
        files = self.manifest.files
        while pos < length and i < len(files):
            f = files[i]
            lo = offset + pos
            if f.size and f.offset <= lo < f.offset + f.size:
                n = min(length - pos, f.offset + f.size - lo)
                out.append((i, lo - f.offset, pos, n))
                pos += n
            i += 1
        return out

    def pwrite(self, offset: int, data: memoryview) -> None:
        for i, foff, pos, n in self._spans(offset, len(data)):
            self.files[i].pwrite(foff, data[pos : pos + n])

    def hash_range(self, offset: int, length: int, h: hashlib._Hash, buf: bytearray) -> None:
        """Feed stream bytes [offset, offset+length) from disk into `h`."""
        mv = memoryview(buf)
        for i, foff, _, n in self._spans(offset, length):
            while n:
                k = os.preadv(self.files[i].fd, [mv[: min(n, len(mv))]], foff)
                if k <= 0:
                    raise ShardcastError(f"short read in staging file at offset {foff}")
                h.update(mv[:k])
                foff += k
                n -= k

    def settle(self, offset: int, length: int) -> None:
        """Write stream bytes [offset, offset+length) to disk now and evict them from the page cache.

        Called once per verified shard when the client fsyncs: the journal then only ever names
        shards whose bytes are on disk, the final fsync has little left to do, and the evicted pages
        are reused by the next shard's writes. Writing into recycled page-cache pages costs a
        fraction of the CPU of a checkpoint-sized dirty page cache (measured ~2x less system time
        per GiB on the benchmark VM, docs/benchmarks-shardcast.md).
        """
        for i, foff, _, n in self._spans(offset, length):
            if self.files[i].direct:
                continue  # written around the page cache already; the final fsync covers the edges
            fd = self.files[i].fd
            if _sync_file_range is not None:
                _sync_file_range(fd, foff, n)
            else:
                os.fdatasync(fd)
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(fd, foff, n, os.POSIX_FADV_DONTNEED)

    def sync_and_close(self, fsync: bool) -> None:
        if fsync:
            for f in self.files:
                os.fsync(f.fd)  # also flushes the device cache behind the O_DIRECT writes
        self.close()

    def close(self) -> None:
        for f in self.files:
            f.close()
        self.files = []


class _ClientSink:
    def __init__(self, staging: Staging, journal: Path, on_verified: Callable[[int], None], *,
                 settle: bool) -> None:
        self.staging = staging
        self._settle = settle
        self._journal = open(journal, "a", buffering=1)  # noqa: SIM115 - closed by close()
        self._lock = threading.Lock()
        self._on_verified = on_verified

    def buffer_phase(self, shard: ShardEntry, pos: int) -> int:
        spans = self.staging._spans(shard.offset + pos, 1)
        return spans[0][1] % ALIGN if spans else 0

    def begin(self, shard: ShardEntry) -> None:
        pass

    def target(self, shard: ShardEntry) -> memoryview | None:
        return None  # received into the engine's aligned buffer, written with O_DIRECT from there

    def write(self, shard: ShardEntry, pos: int, data: memoryview) -> None:
        self.staging.pwrite(shard.offset + pos, data)

    def commit(self, shard: ShardEntry) -> None:
        if self._settle:
            self.staging.settle(shard.offset, shard.size)
        with self._lock:
            self._journal.write(f"{shard.index}\n")
        self._on_verified(shard.index)

    def abort(self, shard: ShardEntry) -> None:
        pass  # the range is simply overwritten by the next attempt

    def close(self) -> None:
        self._journal.close()


class _MemorySink:
    """Receives the delta's shards straight into one buffer (a delta is small: a few % of a checkpoint)."""

    def __init__(self, buf: bytearray) -> None:
        self.view = memoryview(buf)

    def buffer_phase(self, shard: ShardEntry, pos: int) -> int:
        return 0

    def begin(self, shard: ShardEntry) -> None:
        pass

    def target(self, shard: ShardEntry) -> memoryview | None:
        return self.view[shard.offset : shard.offset + shard.size]

    def write(self, shard: ShardEntry, pos: int, data: memoryview) -> None:
        raise AssertionError("unreachable: bytes land in target()")

    def commit(self, shard: ShardEntry) -> None:
        pass

    def abort(self, shard: ShardEntry) -> None:
        pass


class _TotalHasher:
    """sha256 of the whole stream, computed in shard order as shards get verified (pipelined)."""

    def __init__(self, manifest: Manifest, staging: Staging) -> None:
        self.manifest = manifest
        self.staging = staging
        self.h = hashlib.sha256()
        self._ready: set[int] = set()
        self._cv = threading.Condition()
        self._abort = False
        self.error: BaseException | None = None
        self._t = threading.Thread(target=self._run, name="shardcast-total", daemon=True)

    def start(self) -> None:
        self._t.start()

    def verified(self, index: int) -> None:
        with self._cv:
            self._ready.add(index)
            self._cv.notify()

    def abort(self) -> None:
        with self._cv:
            self._abort = True
            self._cv.notify()

    def _run(self) -> None:
        buf = bytearray(_BUF)
        try:
            for s in self.manifest.shards:
                with self._cv:
                    while s.index not in self._ready and not self._abort:
                        self._cv.wait()
                    if self._abort:
                        return
                self.staging.hash_range(s.offset, s.size, self.h, buf)
        except BaseException as e:
            self.error = e

    def result(self) -> str:
        self._t.join()
        if self.error is not None:
            raise FetchError(f"hashing the whole checkpoint failed: {self.error}") from self.error
        return self.h.hexdigest()


class Client:
    """Downloads checkpoints from Shardcast relays.

        client = Client(relays=["http://relay-a:8601", "http://relay-b:8601"], ipfs=ipfs)
        path = client.fetch(manifest_cid, "checkpoints/step-12")
    """

    def __init__(
        self,
        relays: Sequence[str] = (),
        *,
        ipfs: IpfsLike | None = None,
        workers: int = 4,
        wait: float = 10.0,
        stall_timeout: float = 120.0,
        verify_total: bool = False,
        fsync: bool = True,
        direct_io: bool = True,
        use_relay_hints: bool = True,
        on_progress: Callable[[int, int], None] | None = None,
        reputation: SourceReputation | None = None,
        deadline_slack: float = SHARD_DEADLINE_SLACK_S,
    ) -> None:
        """relays: base URLs (origin URLs work too). workers: parallel shard downloads.
        wait: how long a relay may hold a request for a shard still on its way to it.
        deadline_slack: seconds a shard may take, on top of `wait` and its size at `MIN_SOURCE_RATE`,
            before its source is cut off and the shard asked elsewhere (a source dripping bytes).
        verify_total: also recompute the whole-stream sha256 from the written files (a second
            sha256 pass over every byte, pipelined). Off by default: every byte is already checked
            once against its shard's sha256, and the shard digests against the manifest's root.
        fsync: make the files durable before the atomic rename.
        direct_io: write shard bytes with O_DIRECT where the file system allows it (no page-cache
            copy); off: through the page cache.
        on_progress: called with (verified bytes, total bytes).
        reputation: sources that served corrupt shards, remembered across this client's fetches
            (a new one per client when not given; share one between clients to pool it)."""
        self.relays = [r.rstrip("/") for r in relays]
        self.ipfs = ipfs
        self.workers = workers
        self.wait = wait
        self.stall_timeout = stall_timeout
        self.deadline_slack = deadline_slack
        self.verify_total = verify_total
        self.fsync = fsync
        self.direct_io = direct_io
        self.use_relay_hints = use_relay_hints
        self.on_progress = on_progress
        self.reputation = reputation if reputation is not None else SourceReputation()
        self.last_result: FetchResult | None = None

    def resolve(self, manifest_or_cid: Manifest | str | bytes | Path) -> Manifest:
        """A Manifest from a Manifest, its JSON bytes, a JSON file path, or an IPFS CID."""
        if isinstance(manifest_or_cid, Manifest):
            return manifest_or_cid
        if isinstance(manifest_or_cid, bytes):
            return Manifest.from_bytes(manifest_or_cid)
        if isinstance(manifest_or_cid, Path):
            return Manifest.from_bytes(manifest_or_cid.read_bytes(), source=str(manifest_or_cid))
        if self.ipfs is None:
            raise ShardcastError(f"cannot resolve manifest CID {manifest_or_cid!r}: the client has no IPFS client")
        return Manifest.from_bytes(self.ipfs.cat(manifest_or_cid, max_size=MAX_MANIFEST_BYTES),
                                   source=str(manifest_or_cid))

    def fetch(self, manifest_or_cid: Manifest | str | bytes | Path, out_dir: Path | str, *,
              overwrite: bool = False, base: Path | str | None = None) -> Path:
        """Download, verify and atomically write the checkpoint to `out_dir`; returns `out_dir`.

        base: a local directory holding an earlier checkpoint (normally the previous step, as an
        earlier fetch installed it): when the manifest carries a delta against exactly those files,
        only the delta is downloaded and the checkpoint rebuilt from it; else the full checkpoint."""
        return self.fetch_detailed(manifest_or_cid, out_dir, overwrite=overwrite, base=base).path

    def _sources(self, manifest: Manifest) -> list[str]:
        sources = list(self.relays)
        if self.use_relay_hints:
            sources += [h.rstrip("/") for h in manifest.relay_hints if h.rstrip("/") not in sources]
        if not sources:
            raise ShardcastError("no relays to fetch from: pass relays=[...] or publish with relay hints")
        return sources

    @staticmethod
    def _out(out_dir: Path | str, overwrite: bool) -> Path:
        out = Path(out_dir)
        if out.exists() and not overwrite:
            raise OutputExistsError(f"{out} already exists; remove it or pass overwrite=True")
        out.parent.mkdir(parents=True, exist_ok=True)
        return out

    def fetch_detailed(self, manifest_or_cid: Manifest | str | bytes | Path, out_dir: Path | str, *,
                       overwrite: bool = False, base: Path | str | None = None) -> FetchResult:
        t0 = time.monotonic()
        manifest = self.resolve(manifest_or_cid)
        sources = self._sources(manifest)
        out = self._out(out_dir, overwrite)
        delta_error: str | None = None
        if base is not None and manifest.delta is not None:
            try:
                return self._fetch_delta(manifest, sources, Path(base), out, overwrite, t0)
            except (DeltaError, FetchError) as e:
                delta_error = f"{type(e).__name__}: {e}"
                log.warning("delta of %s step %d refused (%s): fetching the full checkpoint", manifest.model_name,
                            manifest.step, delta_error)
        return self._fetch_full(manifest, sources, out, overwrite, t0, delta_error)

    def _fetch_full(self, manifest: Manifest, sources: list[str], out: Path, overwrite: bool, t0: float,
                    delta_error: str | None) -> FetchResult:
        side = out.parent / f".{out.name}.shardcast"
        done = self._prepare_sidecar(side, manifest)
        staging = Staging(manifest, side / "data", direct=self.direct_io)
        resumed = self._reverify(manifest, staging, done)
        verified_bytes = [sum(manifest.shards[i].size for i in resumed)]
        progress_lock = threading.Lock()
        if resumed:
            log.info("resuming %s: %d of %d shards already verified", out, len(resumed), len(manifest.shards))
        # Rewrite the journal with what actually re-verified.
        (side / "journal").write_text("".join(f"{i}\n" for i in sorted(resumed)))

        total = _TotalHasher(manifest, staging) if self.verify_total else None

        def on_verified(index: int) -> None:
            if total is not None:
                total.verified(index)
            if self.on_progress is not None:
                with progress_lock:
                    verified_bytes[0] += manifest.shards[index].size
                    self.on_progress(verified_bytes[0], manifest.total_size)

        if total is not None:
            total.start()
            for i in resumed:
                total.verified(i)
        if self.on_progress is not None:
            self.on_progress(verified_bytes[0], manifest.total_size)
        sink = _ClientSink(staging, side / "journal", on_verified, settle=self.fsync and not self.verify_total)
        missing = [s.index for s in manifest.shards if s.index not in resumed]
        try:
            pool = SourcePool(sources, reputation=self.reputation)
            stats = (download_shards(manifest, missing, pool, sink, workers=self.workers,
                                     wait=self.wait, stall_timeout=self.stall_timeout,
                                     deadline_slack=self.deadline_slack)
                     if missing else DownloadStats())
        except BaseException:
            if total is not None:
                total.abort()
            staging.close()
            raise
        finally:
            sink.close()
        if total is not None:
            digest = total.result()
            if digest != manifest.total_sha256:
                staging.close()
                shutil.rmtree(side, ignore_errors=True)
                raise FetchError(f"whole-checkpoint sha256 {digest} != manifest {manifest.total_sha256} although "
                                 "every shard verified: the manifest itself is inconsistent")
        staging.sync_and_close(self.fsync)
        self._install(side, out, overwrite)
        result = FetchResult(path=out, manifest=manifest, resumed_shards=len(resumed),
                             downloaded_shards=stats.shards, downloaded_bytes=stats.bytes,
                             corrupt_dropped=stats.corrupt, failures=stats.failures,
                             seconds=time.monotonic() - t0,
                             per_source=dict(stats.per_source), delta_error=delta_error)
        self.last_result = result
        log.info("fetched %s step %d into %s: %d shards downloaded, %d resumed, %.2f s", manifest.model_name,
                 manifest.step, out, result.downloaded_shards, result.resumed_shards, result.seconds)
        return result

    # -- deltas ------------------------------------------------------------------------------------

    def fetch_chain(self, chain: Sequence[Manifest | str | bytes | Path], out_dirs: Sequence[Path | str], *,
                    base: Path | str, overwrite: bool = False) -> FetchResult:
        """Catch up several steps through their deltas. `chain`: the manifests of the steps after the one `base`
        holds, oldest first, each carrying its delta against the one before it (the first against `base`'s);
        `out_dirs`: where each step's checkpoint goes. When they link up and their deltas together are fewer
        bytes than the last step's checkpoint, each step is rebuilt from the one before and verified against its
        manifest's file hashes (a client several steps behind downloads the changes, not the model); otherwise,
        or when a delta is refused on the way (the steps rebuilt before it stay), the last step is fetched full.
        Returns the last step's result with the bytes and shards of the whole chain and `delta_steps` the
        number of deltas applied; `delta_error` says why the chain was not used, when it was not."""
        if not chain or len(chain) != len(out_dirs):
            raise ValueError(f"a chain of {len(chain)} manifests needs as many output directories, not {len(out_dirs)}")
        manifests = [self.resolve(m) for m in chain]
        last, t0 = manifests[-1], time.monotonic()
        why = _chain_gap(manifests)
        if why is None and (total := sum(m.delta.size for m in manifests if m.delta)) >= last.total_size:
            why = (f"the {len(manifests)} deltas are {total} bytes together, not fewer than step {last.step}'s "
                   f"checkpoint ({last.total_size})")
        if why is None:
            results: list[FetchResult] = []
            cur = Path(base)
            try:
                for m, d in zip(manifests, out_dirs, strict=True):
                    results.append(self._fetch_delta(m, self._sources(m), cur, self._out(d, overwrite), overwrite,
                                                     time.monotonic()))
                    cur = Path(d)
            except (DeltaError, FetchError) as e:
                why = f"step {manifests[len(results)].step}: {type(e).__name__}: {e}"
                log.warning("delta chain to %s step %d refused (%s): fetching the full checkpoint", last.model_name,
                            last.step, why)
            else:
                per_source: dict[str, int] = {}
                for r in results:
                    for src, n in r.per_source.items():
                        per_source[src] = per_source.get(src, 0) + n
                result = replace(results[-1], downloaded_bytes=sum(r.downloaded_bytes for r in results),
                                 per_source=per_source,
                                 downloaded_shards=sum(r.downloaded_shards for r in results),
                                 corrupt_dropped=sum(r.corrupt_dropped for r in results),
                                 failures=sum(r.failures for r in results), seconds=time.monotonic() - t0,
                                 delta_steps=len(results))
                self.last_result = result
                return result
        return self._fetch_full(last, self._sources(last), self._out(out_dirs[-1], overwrite), overwrite, t0, why)

    def _fetch_delta(self, manifest: Manifest, sources: list[str], base: Path, out: Path, overwrite: bool,
                     t0: float) -> FetchResult:
        """Rebuild the checkpoint from its delta and the files in `base`; raises DeltaError (or
        FetchError when the delta could not be downloaded) for the caller to fall back on."""
        d = manifest.delta
        assert d is not None
        if d.encoding != DELTA_SCHEMA:
            raise UnknownDeltaVersionError(d.encoding, DELTA_SCHEMA)
        if d.size > manifest.total_size:
            raise DeltaError(f"delta of {d.size} bytes is larger than the checkpoint ({manifest.total_size})")
        self._check_base_sizes(base, d.base_files, d.base_step)
        payload = bytearray(d.size)
        sink = _MemorySink(payload)
        pool = SourcePool(sources, reputation=self.reputation)
        # A delta is an optimisation: give up on it quickly and fetch the checkpoint instead.
        stats = download_shards(manifest, [s.index for s in d.shards], pool, sink, workers=self.workers,
                                wait=self.wait, stall_timeout=min(self.stall_timeout, 30.0), max_hard_failures=3,
                                deadline_slack=self.deadline_slack)
        staging = out.parent / f".{out.name}.shardcast-delta"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        maps: dict[str, tuple[int, mmap.mmap | None]] = {}

        def prepare(path: str, size: int, from_base: bool) -> memoryview:
            """The staged file, a kernel copy of the base's (copy_file_range) or empty, mapped writable."""
            p = staging / safe_relpath(path)
            p.parent.mkdir(parents=True, exist_ok=True)
            if from_base:
                src = base / safe_relpath(path)
                if not src.is_file() or src.stat().st_size != size:
                    raise DeltaError(f"{path}: the base {base} has no file of {size} bytes at this path")
                shutil.copyfile(src, p)
            fd = os.open(p, os.O_RDWR | os.O_CREAT, 0o644)
            if not from_base:
                os.ftruncate(fd, size)
            m = mmap.mmap(fd, size) if size else None
            maps[path] = (fd, m)
            return memoryview(m) if m is not None else memoryview(bytearray())

        def done(path: str) -> None:
            fd, m = maps.pop(path)
            if m is not None:
                if self.fsync:
                    m.flush()
                m.close()
            if self.fsync:
                os.fsync(fd)
            os.close(fd)

        try:
            try:
                dstats = decode_delta(payload, [(f.path, f.size, f.sha256) for f in d.files],
                                      base_manifest_id=d.base_manifest_id, prepare=prepare, done=done)
            except DeltaError as e:
                self._diagnose_base(base, d.base_files, d.base_step, e)
                raise
            finally:
                for fd, m in maps.values():  # a refused rebuild: unmap what is left (views may linger)
                    if m is not None:
                        with contextlib.suppress(BufferError):
                            m.close()
                    os.close(fd)
            self._install_dir(staging, out, overwrite)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        result = FetchResult(path=out, manifest=manifest, resumed_shards=0, downloaded_shards=stats.shards,
                             downloaded_bytes=stats.bytes, corrupt_dropped=stats.corrupt, failures=stats.failures,
                             seconds=time.monotonic() - t0, per_source=dict(stats.per_source), delta=True,
                             delta_steps=1)
        self.last_result = result
        log.info("rebuilt %s step %d from its %d-byte delta against step %d (%.2f %% of the checkpoint; decoded in "
                 "%.2f s) into %s", manifest.model_name, manifest.step, d.size, d.base_step,
                 100 * d.size / max(1, manifest.total_size), dstats.seconds, out)
        return result

    @staticmethod
    def _check_base_sizes(base: Path, files: list[FileDigest], step: int) -> None:
        """Cheap checks before the download: every base file is there with its size. Their contents are
        checked by what they rebuild (each rebuilt file against the manifest's sha256), and against the
        base digests when that fails (`_diagnose_base`)."""
        for f in files:
            p = base / safe_relpath(f.path)
            try:
                size = p.stat().st_size
            except OSError as e:
                raise DeltaError(f"base {base} lacks {f.path} of step {step}: {e}") from e
            if size != f.size:
                raise DeltaError(f"base {base}: {f.path} is not step {step}'s file ({size} bytes, expected {f.size})")

    @staticmethod
    def _diagnose_base(base: Path, files: list[FileDigest], step: int, cause: DeltaError) -> None:
        """After a refused rebuild: raise naming the base file that is not the delta's, if one is not."""
        for f in files:
            h = hashlib.sha256()
            try:
                with open(base / safe_relpath(f.path), "rb") as fh:
                    while chunk := fh.read(_BUF):
                        h.update(chunk)
            except OSError:
                continue
            if h.hexdigest() != f.sha256:
                raise DeltaError(f"base {base}: {f.path} is not step {step}'s file (its sha256 differs from the "
                                 f"manifest's base digest): not the delta's base ({cause})") from cause

    @staticmethod
    def _install_dir(staged: Path, out: Path, overwrite: bool, *, sync: bool = False) -> None:
        """Put the directory `staged` at `out` (atomic on one filesystem: readers see all or nothing), moving a
        previous `out` aside first when `overwrite`; `sync` makes the rename durable (fsync of the parent)."""
        trash = None
        if out.exists():
            if not overwrite:
                raise OutputExistsError(f"{out} appeared while fetching; not replacing it")
            trash = out.parent / f".{out.name}.shardcast-old"
            shutil.rmtree(trash, ignore_errors=True)
            out.rename(trash)
        staged.rename(out)
        if sync:
            try:
                dfd = os.open(out.parent, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
            except OSError:
                pass
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    # -- internals -------------------------------------------------------------------------------

    @staticmethod
    def _prepare_sidecar(side: Path, manifest: Manifest) -> set[int]:
        """Claimed-verified shard indices from a previous run of the same manifest (else wipe)."""
        state_p = side / "state.json"
        if side.exists():
            try:
                state = json.loads(state_p.read_text())
                if state.get("schema") != STATE_SCHEMA:
                    raise UnknownSchemaVersionError(state.get("schema"), STATE_SCHEMA)
                if state.get("manifest_id") == manifest.id:
                    claimed = set()
                    for line in (side / "journal").read_text().split():
                        if line.isdigit() and int(line) < len(manifest.shards):
                            claimed.add(int(line))
                    return claimed
                log.info("%s holds a partial download of another version: discarding it", side)
            except (OSError, ValueError, ShardcastError) as e:
                log.warning("discarding unreadable partial download %s: %s", side, e)
            shutil.rmtree(side)
        (side / "data").mkdir(parents=True)
        (side / "manifest.json").write_bytes(manifest.to_bytes())
        (side / "journal").write_text("")
        state_p.write_text(json.dumps({"schema": STATE_SCHEMA, "manifest_id": manifest.id}))
        return set()

    @staticmethod
    def _reverify(manifest: Manifest, staging: Staging, claimed: set[int]) -> set[int]:
        ok: set[int] = set()
        buf = bytearray(_BUF)
        for i in sorted(claimed):
            s = manifest.shards[i]
            h = hashlib.sha256()
            staging.hash_range(s.offset, s.size, h, buf)
            if h.hexdigest() == s.sha256:
                ok.add(i)
            else:
                log.warning("shard %d in the partial download does not verify: fetching it again", i)
        return ok

    @staticmethod
    def _install(side: Path, out: Path, overwrite: bool) -> None:
        Client._install_dir(side / "data", out, overwrite, sync=True)
        shutil.rmtree(side, ignore_errors=True)


def _chain_gap(manifests: list[Manifest]) -> str | None:
    """Why `manifests` (oldest first) do not make a chain of deltas, each against the one before; None when they do."""
    for i, m in enumerate(manifests):
        if m.delta is None:
            return f"step {m.step} carries no delta"
        if i and (m.delta.base_step != manifests[i - 1].step or m.delta.base_manifest_id != manifests[i - 1].id):
            return f"step {m.step}'s delta is against step {m.delta.base_step}, not step {manifests[i - 1].step}"
    return None
