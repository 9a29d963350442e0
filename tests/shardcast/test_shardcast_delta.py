"""Checkpoint deltas (`intellect.ckdelta/v1`): the codec, and origin → relay → client over real HTTP.

The codec tests use random bf16/fp32 tensors perturbed sparsely in safetensors files; the end-to-end
ones a real tiny Llama checkpoint before and after a real AdamW step. Refusals (corrupt, truncated,
wrong version, wrong base, a frame that decompresses past its size) must name what was wrong, and a
client offered a bad delta must still end with the full checkpoint, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from shardcast_helpers import assert_same_tree, relay_complete, wait_for

from intellect.sdk.shardcast import DELTA_MAGIC as MAGIC
from intellect.sdk.shardcast import (
    DELTA_SCHEMA,
    Client,
    DeltaError,
    DeltaHeader,
    Origin,
    Relay,
    UnknownDeltaVersionError,
    decode_to_memory,
    encode_delta,
    zstd_available,
    zstd_compress,
)

pytestmark = pytest.mark.skipif(not zstd_available(), reason="libzstd.so.1 not installed")

SHARD = 256 * 1024
MID = "ab" * 32


# -- helpers -----------------------------------------------------------------------------------------


def _safetensors(tensors: dict[str, tuple[str, np.ndarray]]) -> bytes:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name, (dtype, arr) in tensors.items():
        b = arr.tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def _bf16(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _pair(seed: int = 0, frac: float = 0.05) -> tuple[dict[str, bytes], list[tuple[str, bytes]]]:
    """A base checkpoint and a target whose bf16/fp32 weights moved in `frac` of their elements."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((300, 257)).astype(np.float32) * 0.02
    v = rng.standard_normal(4099).astype(np.float32)
    w2, v2 = w.copy(), v.copy()
    w2.flat[rng.choice(w.size, int(frac * w.size), replace=False)] *= 1.02
    v2[rng.choice(v.size, int(frac * v.size), replace=False)] += 1e-5
    ids = np.arange(7, dtype=np.int64)
    base = {"config.json": b'{"model_type": "llama"}',
            "model.safetensors": _safetensors({"w": ("BF16", _bf16(w)), "v": ("F32", v), "ids": ("I64", ids)}),
            "gone.txt": b"only in the base"}
    target = [("added/notes.txt", b"new in the target " * 50),
              ("config.json", b'{"model_type": "llama"}'),
              ("model.safetensors", _safetensors({"w": ("BF16", _bf16(w2)), "v": ("F32", v2), "ids": ("I64", ids)}))]
    return base, target


def _expected(target: list[tuple[str, bytes]]) -> list[tuple[str, int, str]]:
    return [(p, len(d), hashlib.sha256(d).hexdigest()) for p, d in target]


def _decode(payload: bytes, base: dict[str, bytes], target: list[tuple[str, bytes]],
            base_id: str = MID) -> dict[str, bytes]:
    return decode_to_memory(payload, base, _expected(target), base_manifest_id=base_id)


def _split(payload: bytes) -> tuple[dict, bytes]:  # type: ignore[type-arg]
    (n,) = struct.unpack("<I", payload[8:12])
    return json.loads(payload[12 : 12 + n]), payload[12 + n :]


def _join(header: dict, frames: bytes) -> bytes:  # type: ignore[type-arg]
    h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    return MAGIC + struct.pack("<I", len(h)) + h + frames


# -- the codec ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("frac", [0.05, 0.9], ids=["sparse", "dense"])
def test_delta_roundtrip_bit_exact_and_small(frac: float) -> None:
    base, target = _pair(frac=frac)
    payload, stats = encode_delta(base, target, base_manifest_id=MID, level=9)
    assert _decode(payload, base, target) == dict(target)
    full = sum(len(d) for _, d in target)
    assert stats.payload_bytes == len(payload) < full * (0.25 if frac < 0.5 else 0.9)
    header = DeltaHeader.model_validate(_split(payload)[0])
    kinds = {s.kind for f in header.files for s in f.streams if s.width > 1}
    assert kinds == ({"gaps", "plane"} if frac < 0.5 else {"plane"})
    ops = {f.path: f.op for f in header.files}
    assert ops == {"added/notes.txt": "raw", "config.json": "same", "model.safetensors": "diff"}
    st = next(f for f in header.files if f.path == "model.safetensors")
    # the bf16 tensor as 2-byte differences, the fp32 one as 4-byte ones, everything else bytes
    assert {(s.width, s.transform) for s in st.segments} == {(2, "sub"), (4, "sub"), (1, "xor")}


def test_delta_of_identical_checkpoints_is_tiny() -> None:
    base, _ = _pair()
    same = [(p, base[p]) for p in ("config.json", "model.safetensors")]
    payload, _ = encode_delta(base, same, base_manifest_id=MID)
    assert len(payload) < 1024
    assert _decode(payload, base, same) == dict(same)


@pytest.mark.parametrize("damage, message", [
    (lambda p: p[:-7], "truncated or padded"),
    (lambda p: p + b"\0", "truncated or padded"),
    (lambda p: p[:-40] + bytes(b ^ 0x5A for b in p[-40:-20]) + p[-20:], "sha256|Data corruption|decompress"),
    (lambda p: b"NOTDELTA" + p[8:], "bad magic"),
    (lambda p: p[:8] + struct.pack("<I", 1 << 30) + p[12:], "header length"),
])
def test_damaged_delta_refused(damage: Callable[[bytes], bytes], message: str) -> None:
    base, target = _pair()
    payload, _ = encode_delta(base, target, base_manifest_id=MID, level=3)
    with pytest.raises(DeltaError, match=message):
        _decode(damage(payload), base, target)


def test_unknown_delta_version_refused() -> None:
    base, target = _pair()
    header, frames = _split(encode_delta(base, target, base_manifest_id=MID, level=3)[0])
    header["schema"] = "intellect.ckdelta/v9"
    with pytest.raises(UnknownDeltaVersionError, match=r"intellect\.ckdelta/v9.*intellect\.ckdelta/v1|v1.*v9"):
        _decode(_join(header, frames), base, target)


def test_delta_against_another_base_refused() -> None:
    base, target = _pair(seed=0)
    payload, _ = encode_delta(base, target, base_manifest_id=MID, level=3)
    with pytest.raises(DeltaError, match="delta is against base abab"):
        _decode(payload, base, target, base_id="cd" * 32)
    other, _ = _pair(seed=1)  # same layout, other weights: decodes, then fails the manifest's sha256
    with pytest.raises(DeltaError, match=r"model\.safetensors: rebuilt file has sha256"):
        _decode(payload, other, target)


def test_decompression_bomb_refused_before_allocation() -> None:
    base, target = _pair()
    header, frames = _split(encode_delta(base, target, base_manifest_id=MID, level=3)[0])
    raw = next(f for f in header["files"] if f["op"] == "raw")
    size = raw["size"]
    bomb = zstd_compress(bytes(64 * 1024 * 1024), 3)  # 64 MiB of zeros where `size` bytes are due
    first = sum(s["length"] for f in header["files"][: header["files"].index(raw)] for s in f["streams"])
    rest = frames[first + raw["streams"][0]["length"] :]
    raw["streams"][0]["length"] = len(bomb)
    with pytest.raises(DeltaError, match=f"declares 67108864 bytes, expected {size}"):
        _decode(_join(header, frames[:first] + bomb + rest), base, target)


def test_delta_header_lying_about_files_refused() -> None:
    base, target = _pair()
    header, frames = _split(encode_delta(base, target, base_manifest_id=MID, level=3)[0])
    header["files"][0]["path"] = "../escape.txt"
    with pytest.raises(DeltaError, match="not the checkpoint's"):
        _decode(_join(header, frames), base, target)
    header, frames = _split(encode_delta(base, target, base_manifest_id=MID, level=3)[0])
    st = next(f for f in header["files"] if f["op"] == "diff")
    st["segments"][1]["start"] += 2  # a gap: segments must tile the file
    with pytest.raises(DeltaError, match="do not tile"):
        _decode(_join(header, frames), base, target)


def test_sparse_gaps_running_past_the_tensor_refused() -> None:
    base, target = _pair()
    header, frames = _split(encode_delta(base, target, base_manifest_id=MID, level=3)[0])
    st = next(f for f in header["files"] if f["op"] == "diff")
    gaps = next(s for s in st["streams"] if s["kind"] == "gaps" and s["width"] == 2)
    values = next(s for s in st["streams"] if s["kind"] == "plane" and s["width"] == 2)
    start = sum(s["length"] for f in header["files"][: header["files"].index(st)] for s in f["streams"])
    start += sum(s["length"] for s in st["streams"][: st["streams"].index(gaps)])
    # As many gap bytes as values (within the size bound), each saying "254 zeros first": the last
    # value would land far past the tensor's elements.
    lie = zstd_compress(bytes([254]) * values["size"], 3)
    rest = frames[start + gaps["length"] :]
    gaps["length"], gaps["size"] = len(lie), values["size"]
    with pytest.raises(DeltaError, match="gaps run past"):
        _decode(_join(header, frames[:start] + lie + rest), base, target)


# -- a real checkpoint after a real optimizer step ----------------------------------------------------


def _train_step(src: Path, out: Path, lr: float = 2e-5, dtype: str = "bfloat16") -> Path:
    """`src` (a HF checkpoint) after one AdamW step on a tiny batch, saved in `dtype` to `out`."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)
    ids = torch.randint(0, model.config.vocab_size, (2, 16))
    model(input_ids=ids, labels=ids).loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    opt.step()
    model.to(getattr(torch, dtype)).save_pretrained(out)
    for f in src.iterdir():
        if f.name.startswith("tokenizer") or f.name == "special_tokens_map.json":
            shutil.copy(f, out / f.name)
    return out


@pytest.fixture(scope="module")
def steps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Step 1 (a tiny Llama in bf16) and step 2 (after one real AdamW step), as HF checkpoints."""
    from shardcast_helpers import write_tiny_hf_checkpoint

    root = tmp_path_factory.mktemp("delta")
    init = write_tiny_hf_checkpoint(root / "init")
    one = _train_step(init, root / "step-1", lr=0.0)  # the init weights, in bf16
    return one, _train_step(init, root / "step-2")


def _files(d: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(d).as_posix(), p.read_bytes()) for p in sorted(d.rglob("*")) if p.is_file()]


def test_real_checkpoint_after_adamw_step_rebuilds_bit_exact(steps: tuple[Path, Path]) -> None:
    one, two = steps
    base, target = dict(_files(one)), _files(two)
    payload, _ = encode_delta(base, target, base_manifest_id=MID)
    assert _decode(payload, base, target) == dict(target)
    assert len(payload) < 0.5 * sum(len(d) for _, d in target)


# -- origin → relay → client, real HTTP ---------------------------------------------------------------


@pytest.fixture
def origin(tmp_path: Path):  # type: ignore[no-untyped-def]
    o = Origin(tmp_path / "origin", shard_size=SHARD).start()
    yield o
    o.stop()


def _local_copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_client_at_previous_step_fetches_only_the_delta_through_a_relay(
        tmp_path: Path, origin: Origin, steps: tuple[Path, Path]) -> None:
    one, two = steps
    m1, _ = origin.publish(one, step=1, model_name="tiny")
    assert m1.delta is None  # nothing published before it
    relay = Relay([origin.url], tmp_path / "relay", poll_wait=25).start()
    try:
        m2, _ = origin.publish(two, step=2, model_name="tiny")
        assert m2.delta is not None and m2.delta.base_manifest_id == m1.id and m2.delta.base_step == 1
        assert m2.delta.encoding == DELTA_SCHEMA and m2.delta.size < m2.total_size // 2
        assert [f.sha256 for f in m2.delta.files] == [hashlib.sha256(d).hexdigest() for _, d in _files(two)]
        wait_for(lambda: relay_complete(relay, m2.id), timeout=60, what="relay to hold step 2 and its delta")
        served = relay.server.bytes_served
        held = _local_copy(one, tmp_path / "worker" / "step-1")  # what the worker fetched last step
        res = Client([relay.url], fsync=False).fetch_detailed(m2, tmp_path / "worker" / "step-2", base=held)
        assert res.delta and res.delta_error is None
        assert res.downloaded_bytes == m2.delta.size
        assert relay.server.bytes_served - served == m2.delta.size  # the relay sent the delta, nothing else
        assert_same_tree(two, tmp_path / "worker" / "step-2")
        # A client holding no previous step gets the checkpoint itself.
        served = relay.server.bytes_served
        res = Client([relay.url], fsync=False).fetch_detailed(m2, tmp_path / "new" / "step-2")
        assert not res.delta and res.downloaded_bytes == m2.total_size
        assert relay.server.bytes_served - served == m2.total_size
        assert_same_tree(two, tmp_path / "new" / "step-2")
    finally:
        relay.stop()


def test_wrong_base_refused_and_full_checkpoint_fetched(tmp_path: Path, origin: Origin,
                                                        steps: tuple[Path, Path]) -> None:
    one, two = steps
    origin.publish(one, step=1, model_name="tiny")
    m2, _ = origin.publish(two, step=2, model_name="tiny")
    held = _local_copy(one, tmp_path / "held")
    weights = next(held.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-3] ^= 1  # the worker's copy of step 1 is not what was published
    weights.write_bytes(bytes(data))
    res = Client([origin.url], fsync=False).fetch_detailed(m2, tmp_path / "out", base=held)
    assert not res.delta and res.downloaded_bytes == m2.total_size
    assert res.delta_error is not None and "not step 1's file" in res.delta_error
    assert_same_tree(two, tmp_path / "out")
    # No base directory at all (pruned): refused the same way.
    res = Client([origin.url], fsync=False).fetch_detailed(m2, tmp_path / "out2", base=tmp_path / "missing")
    assert not res.delta and "lacks" in (res.delta_error or "")
    assert_same_tree(two, tmp_path / "out2")


def _flip_frame_byte(p: bytes) -> bytes:
    return p[:-30] + bytes([p[-30] ^ 0xFF]) + p[-29:]


def _rename_version(p: bytes) -> bytes:
    header, frames = _split(p)
    header["schema"] = "intellect.ckdelta/v2"
    return _join(header, frames)


@pytest.mark.parametrize("damage, message", [
    (_flip_frame_byte, "DeltaError: .*(sha256|corruption|decompress)"),
    (lambda p: p[: len(p) - 100], "DeltaError: .*truncated"),
    (_rename_version, "UnknownDeltaVersionError: .*intellect.ckdelta/v2"),
], ids=["corrupt", "truncated", "wrong-version"])
def test_bad_delta_from_the_origin_refused_and_full_checkpoint_fetched(
        tmp_path: Path, origin: Origin, steps: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch,
        damage: Callable[[bytes], bytes], message: str) -> None:
    """The trainer's own delta is bad (a bug, a hostile trainer): its shards hash as the manifest says,
    so only the decoder can refuse it; the client then fetches the full checkpoint."""
    one, two = steps
    real = origin.delta_encoder

    def damaged(*a, **kw):  # type: ignore[no-untyped-def]
        payload, stats = real(*a, **kw)
        bad = damage(payload)
        stats.payload_bytes = len(bad)
        return bad, stats

    origin.publish(one, step=1, model_name="tiny")
    monkeypatch.setattr(origin, "delta_encoder", damaged)
    m2, _ = origin.publish(two, step=2, model_name="tiny")
    assert m2.delta is not None
    held = _local_copy(one, tmp_path / "held")
    res = Client([origin.url], fsync=False).fetch_detailed(m2, tmp_path / "out", base=held)
    assert not res.delta and res.downloaded_bytes == m2.total_size
    assert res.delta_error is not None
    assert re.search(message, res.delta_error), res.delta_error
    assert_same_tree(two, tmp_path / "out")
    assert not (tmp_path / ".out.shardcast-delta").exists()


def test_unknown_delta_encoding_in_manifest_refused_and_full_checkpoint_fetched(
        tmp_path: Path, origin: Origin, steps: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = steps
    origin.publish(one, step=1, model_name="tiny")
    real = origin.delta_encoder

    def named_v7(*a, **kw):  # type: ignore[no-untyped-def]
        payload, stats = real(*a, **kw)
        stats.encoding = "intellect.ckdelta/v7"  # an encoding this client does not know
        return payload, stats

    monkeypatch.setattr(origin, "delta_encoder", named_v7)
    m2, _ = origin.publish(two, step=2, model_name="tiny")
    assert m2.delta is not None and m2.delta.encoding == "intellect.ckdelta/v7"
    res = Client([origin.url], fsync=False).fetch_detailed(m2, tmp_path / "out", base=one)
    assert not res.delta and "intellect.ckdelta/v7" in (res.delta_error or "")
    assert_same_tree(two, tmp_path / "out")


def test_origin_publishes_the_checkpoint_when_its_delta_fails(tmp_path: Path, origin: Origin, steps: tuple[Path, Path],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    one, two = steps
    origin.publish(one, step=1, model_name="tiny")

    def broken(*a, **kw):  # type: ignore[no-untyped-def]
        raise RuntimeError("encoder bug")

    monkeypatch.setattr(origin, "delta_encoder", broken)
    m2, _ = origin.publish(two, step=2, model_name="tiny")
    assert m2.delta is None
    res = Client([origin.url], fsync=False).fetch_detailed(m2, tmp_path / "out", base=one)
    assert not res.delta and res.delta_error is None
    assert_same_tree(two, tmp_path / "out")


# -- a node several steps behind: a chain of deltas --------------------------------------------------


@pytest.fixture(scope="module")
def three_steps(steps: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """Steps 1 and 2 as `steps`, and step 3: step 2 after one more real AdamW step."""
    one, two = steps
    return one, two, _train_step(two, tmp_path_factory.mktemp("delta3") / "step-3")


def test_a_client_two_steps_behind_rebuilds_both_from_their_deltas(tmp_path: Path, three_steps) -> None:
    """Issue 38: a worker holding step 1 when step 3 is out downloads the deltas of 2 and 3 (fewer bytes than
    step 3's checkpoint), rebuilds both bit-exact, each checked against its manifest; through the worker's own
    `fetch_checkpoint`, which follows the deltas back to the step it holds (manifest CIDs as the chain gives
    them). A node holding nothing, or a chain that does not link up, gets the checkpoint itself."""
    from intellect.agents.roles.checkpoints import MAX_DELTA_CHAIN, checkpoint_dir, fetch_checkpoint
    from intellect.sdk.ipfs import EmbeddedIpfs
    from intellect.sdk.shardcast import SourceReputation

    one, two, three = three_steps
    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    origin = Origin(tmp_path / "origin", shard_size=SHARD, ipfs=ipfs).start()
    try:
        published = {s: origin.publish(d, step=s, model_name="tiny") for s, d in ((1, one), (2, two), (3, three))}
        (m2, _), (m3, cid3) = published[2], published[3]
        assert m3.delta is not None and m3.delta.base_step == 2 and m3.delta.base_manifest_id == m2.id
        chain_bytes = m2.delta.size + m3.delta.size  # type: ignore[union-attr]
        assert chain_bytes < m3.total_size

        root = tmp_path / "worker"
        _local_copy(one, checkpoint_dir(root, 1))  # what it fetched before it fell behind
        asked: list[int] = []
        res = fetch_checkpoint(cid3, root, 3, sources=[origin.url], ipfs=ipfs, reputation=SourceReputation(),
                               cid_of=lambda s: asked.append(s) or published[s][1])  # type: ignore[func-returns-value]
        assert asked == [2] and res.delta and res.delta_steps == 2 and res.delta_error is None
        assert res.downloaded_bytes == chain_bytes and res.path == checkpoint_dir(root, 3)
        assert sum(res.per_source.values()) == res.downloaded_shards == len(m2.delta.shards) + len(m3.delta.shards)  # type: ignore[union-attr]
        assert_same_tree(two, checkpoint_dir(root, 2))
        assert_same_tree(three, checkpoint_dir(root, 3))

        # the same with the one step before held: one delta, no chain asked for
        res = fetch_checkpoint(cid3, tmp_path / "w2", 3, sources=[origin.url], ipfs=ipfs,
                               reputation=SourceReputation(), cid_of=lambda s: pytest.fail("no chain needed"))
        assert not res.delta and res.downloaded_bytes == m3.total_size  # nothing held: the checkpoint itself
        _local_copy(two, checkpoint_dir(tmp_path / "w3", 2))
        res = fetch_checkpoint(cid3, tmp_path / "w3", 3, sources=[origin.url], ipfs=ipfs,
                               reputation=SourceReputation(), cid_of=lambda s: pytest.fail("no chain needed"))
        assert res.delta_steps == 1 and res.downloaded_bytes == m3.delta.size  # type: ignore[union-attr]
        assert MAX_DELTA_CHAIN >= 2

        # manifests that do not link up (here out of order): the last one fetched whole, saying why
        res = Client([origin.url], fsync=False).fetch_chain([m3, m2], [tmp_path / "x3", tmp_path / "x2"],
                                                            base=checkpoint_dir(root, 1))
        assert not res.delta and res.downloaded_bytes == m2.total_size
        assert "step 2's delta is against step 1, not step 3" in (res.delta_error or "")
        assert_same_tree(two, tmp_path / "x2")
    finally:
        origin.stop()
