"""The client's staging writer: O_DIRECT middles + page-cache edges assemble the exact bytes."""

from __future__ import annotations

import ctypes
import os
import random
from pathlib import Path

import pytest

from intellect.sdk.shardcast import Staging, build_shards


def _checkpoint(d: Path, sizes: list[int], seed: int) -> bytes:
    """Files of the given sizes (sorted names = stream order); returns the concatenated stream."""
    rng = random.Random(seed)
    d.mkdir(parents=True)
    stream = b""
    for i, n in enumerate(sizes):
        data = rng.randbytes(n)
        (d / f"part-{i:02d}.bin").write_bytes(data)
        stream += data
    return stream


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_staging_pwrite_any_order_and_chunking_byte_identical(tmp_path: Path, direct: bool, seed: int) -> None:
    # unaligned file boundaries, a file smaller than the direct threshold, an empty file
    sizes = [1_300_123, 7, 0, 2_000_001, 300_000, 1_048_576]
    stream = _checkpoint(tmp_path / "ckpt", sizes, seed)
    m = build_shards(tmp_path / "ckpt", tmp_path / "shards", step=1, model_name="t", shard_size=777_777)
    staging = Staging(m, tmp_path / "out", direct=direct)
    if direct:
        assert staging.direct or not hasattr(os, "O_DIRECT")
    rng = random.Random(seed)
    shards = list(m.shards)
    rng.shuffle(shards)  # shards land in any order, each in odd-sized chunks
    for s in shards:
        pos = 0
        while pos < s.size:
            n = min(s.size - pos, rng.choice([1, 4095, 4096, 65_537, 300_001, 1 << 20]))
            staging.pwrite(s.offset + pos, memoryview(stream[s.offset + pos : s.offset + pos + n]))
            pos += n
        staging.settle(s.offset, s.size)
    staging.sync_and_close(True)
    got = b"".join((tmp_path / "out" / f.path).read_bytes() for f in m.files)
    assert got == stream


def test_staging_rewrite_after_failed_attempt_overwrites_range(tmp_path: Path) -> None:
    stream = _checkpoint(tmp_path / "ckpt", [3_000_001], 9)
    m = build_shards(tmp_path / "ckpt", tmp_path / "shards", step=1, model_name="t", shard_size=1_000_003)
    staging = Staging(m, tmp_path / "out", direct=True)
    s = m.shards[1]
    staging.pwrite(s.offset, memoryview(b"\xff" * s.size))  # a corrupt attempt, later aborted
    for sh in m.shards:
        staging.pwrite(sh.offset, memoryview(stream[sh.offset : sh.offset + sh.size]))
    staging.sync_and_close(True)
    assert (tmp_path / "out" / m.files[0].path).read_bytes() == stream


def _fallocates(path: Path) -> bool:
    """Whether this file system reserves blocks with Linux `fallocate` (mode 0), asked apart from the SDK."""
    try:
        fallocate = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return False
    fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
    with open(path, "wb") as f:
        return int(fallocate(f.fileno(), 0, 0, 1 << 20)) == 0


def test_staging_direct_preallocates_blocks(tmp_path: Path) -> None:
    if not _fallocates(tmp_path / "probe"):
        pytest.skip("this file system does not fallocate")
    stream = _checkpoint(tmp_path / "ckpt", [3_000_001], 4)
    m = build_shards(tmp_path / "ckpt", tmp_path / "shards", step=1, model_name="t", shard_size=1_000_003)
    staging = Staging(m, tmp_path / "out", direct=True)
    st = os.fstat(staging.files[0].fd)
    direct = staging.direct
    staging.close()
    if not direct:
        pytest.skip("no O_DIRECT on this file system")
    # every block reserved up front (a sparse ftruncate'd file would have ~0 blocks)
    assert st.st_size == len(stream) and st.st_blocks * 512 >= len(stream)
