"""Manifest schema: building, identity, and refusal of bad manifests."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from intellect.sdk.shardcast import (
    InconsistentManifestError,
    Manifest,
    ManifestError,
    UnknownSchemaVersionError,
    UnsafePathError,
    build_shards,
)


def _build(ckpt: Path, tmp_path: Path, shard_size: int = 1_000_000) -> Manifest:
    return build_shards(ckpt, tmp_path / "shards", step=3, model_name="tiny", shard_size=shard_size)


def test_build_shards_hashes_match_files(random_checkpoint: Path, tmp_path: Path) -> None:
    m = _build(random_checkpoint, tmp_path)
    stream = b"".join((random_checkpoint / f.path).read_bytes() for f in m.files)
    assert m.total_size == len(stream) == 3_000_123 + len('{"model_type": "llama"}')
    assert m.total_sha256 == hashlib.sha256(stream).hexdigest()
    assert [f.path for f in m.files] == sorted(f.path for f in m.files)
    assert len(m.shards) == 4 and m.shards[-1].size == m.total_size - 3_000_000
    for s in m.shards:
        data = (tmp_path / "shards" / str(s.index)).read_bytes()
        assert data == stream[s.offset : s.offset + s.size]
        assert hashlib.sha256(data).hexdigest() == s.sha256


def test_manifest_roundtrip_keeps_id(random_checkpoint: Path, tmp_path: Path) -> None:
    m = _build(random_checkpoint, tmp_path)
    again = Manifest.from_bytes(m.to_bytes())
    assert again == m and again.id == m.id == hashlib.sha256(m.to_bytes()).hexdigest()
    assert json.loads(m.to_bytes())["schema"] == "intellect.shardcast.manifest/v1"


def test_manifest_segments_cover_shard_across_files(random_checkpoint: Path, tmp_path: Path) -> None:
    m = _build(random_checkpoint, tmp_path, shard_size=1_000_000)
    # config.json (23 bytes) sorts first; shard 1 = end of model-00001 + start of model-00002.
    spans = [(f.path, off, n) for f, off, n in m.segments(m.shards[1])]
    assert spans == [
        ("model-00001-of-00002.safetensors", 1_000_000 - 23, 1_700_000 - (1_000_000 - 23)),
        ("model-00002-of-00002.safetensors", 0, 2_000_000 - 23 - 1_700_000),
    ]
    assert sum(n for _, _, n in spans) == m.shards[1].size


def _raw(m: Manifest) -> dict:
    return json.loads(m.to_bytes())


def test_from_bytes_unknown_schema_refused(random_checkpoint: Path, tmp_path: Path) -> None:
    raw = _raw(_build(random_checkpoint, tmp_path))
    raw["schema"] = "intellect.shardcast.manifest/v2"
    with pytest.raises(UnknownSchemaVersionError, match="manifest/v2"):
        Manifest.from_bytes(json.dumps(raw).encode())
    del raw["schema"]
    with pytest.raises(UnknownSchemaVersionError):
        Manifest.from_bytes(json.dumps(raw).encode())


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda r: r.update(total_size=r["total_size"] + 1), "total_size"),
        (lambda r: r["shards"][0].update(size=r["shards"][0]["size"] - 1), "shard 0 has size"),
        (lambda r: r["shards"][1].update(index=5), "has index 5"),
        (lambda r: r["files"][1].update(offset=0), "starts at 0"),
        (lambda r: r["shards"].pop(), "shards add up"),
        (lambda r: r["shards"][2].update(sha256="0" * 64), "root_sha256"),
    ],
)
def test_from_bytes_inconsistent_sizes_refused(random_checkpoint: Path, tmp_path: Path, mutate, match) -> None:  # type: ignore[no-untyped-def]
    raw = _raw(_build(random_checkpoint, tmp_path))
    mutate(raw)
    with pytest.raises(InconsistentManifestError, match=match):
        Manifest.from_bytes(json.dumps(raw).encode())


@pytest.mark.parametrize("bad", ["../evil", "/etc/passwd", "a/../../b", "a//b", "./a", "C:/x", "a\\..\\b", ""])
def test_from_bytes_escaping_path_refused(random_checkpoint: Path, tmp_path: Path, bad: str) -> None:
    raw = _raw(_build(random_checkpoint, tmp_path))
    raw["files"][0]["path"] = bad
    with pytest.raises(UnsafePathError):
        Manifest.from_bytes(json.dumps(raw).encode())


def test_from_bytes_file_and_directory_clash_refused(random_checkpoint: Path, tmp_path: Path) -> None:
    raw = _raw(_build(random_checkpoint, tmp_path))
    raw["files"][1]["path"] = "config.json/x"
    with pytest.raises(UnsafePathError, match="both a file and a directory"):
        Manifest.from_bytes(json.dumps(raw).encode())


def test_from_bytes_garbage_refused() -> None:
    with pytest.raises(ManifestError, match="not valid JSON"):
        Manifest.from_bytes(b"\xff{")
    with pytest.raises(ManifestError, match="JSON object"):
        Manifest.from_bytes(b"[1]")
    with pytest.raises(ManifestError, match="invalid manifest"):
        Manifest.from_bytes(json.dumps({"schema": "intellect.shardcast.manifest/v1", "step": -1}).encode())
