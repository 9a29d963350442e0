"""Bad-input fuzzing of every parser that reads bytes from another machine: shard manifests, CIDs and dag-pb
blocks, rollout files, TOPLOC proofs, attestations, task sets, agent configs, deployment files, revert data,
event logs and answers from an RPC node, Kubo RPC answers, peers' status documents.

Three kinds of test, and what each asserts:
- "..._refused": every input is invalid, so the parser must raise its own error (`pytest.raises`).
- "..._refused_or_round_trips": the input may still be valid (a flipped byte inside a name); the parser raises
  its own error, or what it accepted re-encodes and parses back unchanged.
- "..._mutations_only_<error>": a seeded loop of byte flips, truncations, insertions, non-UTF-8 bytes, huge
  integers, deep nesting and splices of a valid document; only the format's own error type may escape (any
  other exception fails the test with its traceback), and accepted mutants round-trip.

The default run keeps the counts modest; INTELLECT_FUZZ_EXAMPLES (hypothesis) and INTELLECT_FUZZ_MUTATIONS (the
seeded loops) raise them for a longer hunt (e.g. 2000 each)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from intellect.sdk.http import HttpServer, JsonHandler
from intellect.sdk.ipfs import Cid, decode_node
from intellect.sdk.shardcast import Manifest, ManifestError, build_shards

EXAMPLES = int(os.environ.get("INTELLECT_FUZZ_EXAMPLES", "60"))
MUTATIONS = int(os.environ.get("INTELLECT_FUZZ_MUTATIONS", "240"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# inputs that break naive JSON readers: deep nesting (RecursionError), huge integers (ValueError: int digits);
# none of them is a valid document of any format
NASTY_JSON = [
    b"[" * 50_000 + b"]" * 50_000,
    b'{"a":' * 20_000 + b"1" + b"}" * 20_000,
    b"1" * 5000,
    b'{"schema": ' + b"9" * 5000 + b"}",
    b"\xff\xfe\x00garbage",
    b"",
    b"null",
    b"[]",
    b'"string"',
    b"NaN",
]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20,
)

T = TypeVar("T")


def _mutate(data: bytes, rnd: random.Random, n: int) -> bytes:
    """`n` random byte flips / truncation / insertion of a valid document."""
    buf = bytearray(data)
    for _ in range(n):
        op = rnd.randrange(3)
        if op == 0 and buf:
            buf[rnd.randrange(len(buf))] = rnd.randrange(256)
        elif op == 1 and buf:
            del buf[rnd.randrange(len(buf)):]
        else:
            buf.insert(rnd.randrange(len(buf) + 1), rnd.randrange(256))
    return bytes(buf)


_NOT_UTF8 = [b"\xff", b"\xfe\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\x80", b"\xf8\x88\x80\x80\x80", b"\xfc"]
# a JSON/YAML scalar after a key: the place to put a huge number or a deep nest
_SCALAR = re.compile(rb'(?<=:)\s*("[^"\n]{0,200}"|-?\d+(?:\.\d+)?|true|false|null|[A-Za-z0-9_./-]+)')


def _mutants(good: bytes, seed: int, count: int = MUTATIONS, *, names: list[bytes] | None = None,
             depths: tuple[int, ...] = (50, 900, 5000, 60_000)) -> Iterator[tuple[str, bytes]]:
    """`count` seeded mutations of a valid document, cycling through byte flips, truncations, insertions,
    non-UTF-8 bytes, huge integers, deep nesting, spliced copies and (when `names` are given: column or
    key names) the same name made non-UTF-8 everywhere it appears."""
    rnd = random.Random(seed)
    kinds = ["flip", "truncate", "insert", "not_utf8", "huge_int", "nest", "splice"] + (["name"] if names else [])
    scalars = list(_SCALAR.finditer(good))
    for i in range(count):
        kind = kinds[i % len(kinds)]
        buf = bytearray(good)
        pos = rnd.randrange(len(buf) + 1)
        if kind == "flip":
            for _ in range(rnd.randint(1, 8)):
                buf[rnd.randrange(len(buf))] = rnd.randrange(256)
        elif kind == "truncate":
            del buf[rnd.randrange(len(buf)):]
        elif kind == "insert":
            buf[pos:pos] = rnd.randbytes(rnd.randint(1, 16))
        elif kind == "not_utf8":
            buf[pos:pos] = rnd.choice(_NOT_UTF8)
        elif kind in ("huge_int", "nest") and scalars:
            m = rnd.choice(scalars)
            if kind == "huge_int":
                new = rnd.choice([b"-", b""]) + b"9" * rnd.choice([20, 80, 400, 5000]) + rnd.choice([b"", b"e999"])
            else:
                depth = rnd.choice(depths)
                new = rnd.choice([b"[" * depth + b"1" + b"]" * depth, b'{"a":' * depth + b"1" + b"}" * depth])
            buf[m.start(1):m.end(1)] = new
        elif kind in ("huge_int", "nest"):  # binary formats: a length or count field turned huge
            buf[pos:pos + 8] = rnd.choice([b"\xff" * 8, b"\xff\xff\xff\x7f", b"\x80" * 8 + b"\x01"])
        elif kind == "splice":
            a = rnd.randrange(len(good))
            buf[pos:pos] = good[a:a + rnd.randint(1, 64)]
        elif kind == "name" and names:
            name = rnd.choice(names)
            buf = bytearray(bytes(buf).replace(name, rnd.choice(_NOT_UTF8)[:1] + name[1:]))
        yield kind, bytes(buf)


def _parse_or_refuse(parse: Callable[[bytes], T], data: bytes, error: type[BaseException] | tuple[type, ...],
                     *, naming: str = "") -> T | None:
    """`parse(data)`, or None when it raised `error` (with a message naming `naming`). Any other exception
    propagates and fails the calling test."""
    try:
        return parse(data)
    except error as exc:
        assert str(exc), f"{type(exc).__name__} without a message"
        if naming:
            assert naming in str(exc), f"{type(exc).__name__} does not name {naming!r}: {exc}"
        return None


# ------------------------------------------------------------------------------------------------- manifests


@pytest.fixture(scope="module")
def manifest_bytes(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("ckpt")
    (d / "model.safetensors").write_bytes(random.Random(1).randbytes(3000))
    (d / "config.json").write_text('{"model_type": "llama"}')
    return build_shards(d, d.parent / "shards", step=3, model_name="tiny", shard_size=1000).to_bytes()


def _manifest(data: bytes) -> Manifest | None:
    """The parsed manifest, or None when it was refused with a ManifestError naming the source; an accepted
    one must round-trip unchanged through its canonical bytes."""
    m = _parse_or_refuse(lambda d: Manifest.from_bytes(d, source="cid-fuzz"), data, ManifestError, naming="cid-fuzz")
    if m is not None:
        assert Manifest.from_bytes(m.to_bytes()) == m
    return m


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_manifest_from_bytes_nasty_json_refused(data: bytes) -> None:
    with pytest.raises(ManifestError, match="cid-nasty"):
        Manifest.from_bytes(data, source="cid-nasty")


@FUZZ
@given(seed=st.integers(0, 2**32), n=st.integers(1, 8))
def test_manifest_from_bytes_mutated_refused_or_round_trips(manifest_bytes, seed: int, n: int) -> None:
    _manifest(_mutate(manifest_bytes, random.Random(seed), n))
    assert Manifest.from_bytes(manifest_bytes).to_bytes() == manifest_bytes  # the good one still parses


def test_manifest_mutations_only_manifest_error(manifest_bytes) -> None:
    kinds: dict[str, int] = {}
    for kind, data in _mutants(manifest_bytes, seed=15):
        if _manifest(data) is None:
            kinds[kind] = kinds.get(kind, 0) + 1
    assert sum(kinds.values()) >= MUTATIONS // 2, kinds  # most mutants are refused, of every kind
    assert set(kinds) >= {"flip", "truncate", "insert", "not_utf8", "huge_int", "nest"}, kinds


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(["schema", "model_name", "step", "created_at", "shard_size",
                                             "total_size", "files", "shards", "total_sha256", "root_sha256",
                                             "relay_hints", "extra"]), json_values, max_size=12))
def test_manifest_from_obj_random_fields_refused(doc: dict[str, Any]) -> None:
    doc.setdefault("schema", "intellect.shardcast.manifest/v1")
    with pytest.raises(ManifestError):
        Manifest.from_bytes(json.dumps(doc).encode())


# ------------------------------------------------------------------------------------------------------ CIDs


@FUZZ
@given(text=st.text(max_size=80) | st.from_regex(r"\A(b[a-z2-7]{0,70}|Qm[1-9A-HJ-NP-Za-km-z]{44}|z[1-9A-Za-z]{0,60})\Z"))
@example(text="Qm" + "0" * 44)
@example(text="b")
@example(text="bafkrei")
@example(text="z")
def test_cid_parse_garbage_refused(text: str) -> None:
    from intellect.sdk import InvalidCidError

    try:
        cid = Cid.parse(text)
    except InvalidCidError:
        return
    assert Cid.parse(str(cid)) == cid  # whatever parses round-trips


@FUZZ
@given(raw=st.binary(max_size=80))
@example(raw=b"\x01")
@example(raw=b"\x01\x55")
@example(raw=b"\x01\x55\x12")
@example(raw=b"\x01\x55\x12\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")
def test_cid_from_bytes_garbage_refused_or_round_trips(raw: bytes) -> None:
    from intellect.sdk import InvalidCidError

    cid = _parse_or_refuse(Cid.from_bytes, raw, InvalidCidError)
    if cid is not None:
        assert Cid.from_bytes(cid.to_bytes()) == cid and Cid.parse(str(cid)) == cid


@FUZZ
@given(block=st.binary(max_size=300))
@example(block=b"\x12\x05\x0a\x03abc")
@example(block=b"\x0a\xff\xff\xff\xff\x0f")
def test_decode_node_garbage_refused_or_consistent(block: bytes) -> None:
    from intellect.sdk import IpfsError

    node = _parse_or_refuse(decode_node, block, IpfsError)
    if node is not None:  # what is accepted is a file node whose parts agree
        assert len(node.links) == len(node.tsizes)
        assert len(node.blocksizes) in (0, len(node.links))


def test_decode_node_mutations_only_ipfs_error() -> None:
    """Mutants of a real dag-pb file node (3 links): only IpfsError; an accepted one re-encodes to a node
    that decodes to the same links."""
    from intellect.sdk import IpfsError
    from intellect.sdk.ipfs import Link, encode_node

    links = [Link(Cid.of(bytes([i]) * 10), 10, 10) for i in range(3)]
    good = encode_node(links)
    refused = 0
    for _kind, data in _mutants(good, seed=16):
        node = _parse_or_refuse(decode_node, data, IpfsError)
        if node is None:
            refused += 1
        elif node.blocksizes:
            again = decode_node(encode_node([Link(c, t, n) for c, n, t in zip(node.links, node.blocksizes,
                                                                                node.tsizes, strict=True)]))
            assert again.links == node.links
    assert refused > 0


def test_embedded_ipfs_garbage_reads_lose_nothing(tmp_path: Path) -> None:
    """Garbage CIDs and unknown content against a store: clear errors, and the stored content survives."""
    from intellect.sdk import IpfsError
    from intellect.sdk.ipfs import EmbeddedIpfs

    store = EmbeddedIpfs(tmp_path / "ipfs")
    good = random.Random(2).randbytes(600_000)  # a multi-block DAG
    cid = store.add(good)
    rnd = random.Random(3)
    bad = ["", "Qm", "bafy", "not a cid", "../../etc/passwd", "b" + "a" * 58, str(Cid.of(b"absent"))]
    bad += ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz234567") for _ in range(59)) for _ in range(20)]
    for text in bad:
        with pytest.raises(IpfsError):
            store.cat(text)
    assert store.cat(cid) == good


# ----------------------------------------------------------------------------------------------- rollout files

WORKER = "0x" + "ab" * 20


@pytest.fixture(scope="module")
def rollout_bytes() -> bytes:
    from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow

    rows = [RolloutRow(problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 40)), reward=0.9,
                       task_reward=1.0, length_penalty=0.1, target_length=64, advantage=0.5 * (k - 1),
                       policy_step=7, proofs=[bytes(258), bytes(258)], worker=WORKER)
            for p in range(2) for k in range(2)]
    meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=WORKER, policy_step=7, group_size=2)
    return RolloutFile(meta, rows, name="fuzz").to_bytes()


def _rollouts(data: bytes) -> Any:
    """The parsed rollout file, or None when refused with a RolloutFileError naming the file; an accepted one
    round-trips unchanged (meta and rows) through its own bytes."""
    from intellect.verifier.rollouts import RolloutFile, RolloutFileError

    rf = _parse_or_refuse(lambda d: RolloutFile.from_bytes(d, name="fuzzed"), data, RolloutFileError,
                          naming="fuzzed")
    if rf is not None:
        back = RolloutFile.from_bytes(rf.to_bytes(), name="again")
        assert back.meta == rf.meta and back.rows == rf.rows
    return rf


@FUZZ
@given(seed=st.integers(0, 2**32), n=st.integers(1, 6))
def test_rollout_file_mutated_bytes_refused_or_round_trips(rollout_bytes, seed: int, n: int) -> None:
    _rollouts(_mutate(rollout_bytes, random.Random(seed), n))


def test_rollout_file_mutations_only_rollout_file_error(rollout_bytes) -> None:
    """Including every column name made non-UTF-8 (pyarrow 26 reads such a file and fails on the schema walk)."""
    from intellect.verifier.rollouts import ARROW_SCHEMA

    names = [f.name.encode() for f in ARROW_SCHEMA]
    refused: dict[str, int] = {}
    for kind, data in _mutants(rollout_bytes, seed=17, names=names):
        if _rollouts(data) is None:
            refused[kind] = refused.get(kind, 0) + 1
    assert refused.get("name", 0) >= MUTATIONS // 8 - 1, refused  # every non-UTF-8 name is refused
    assert sum(refused.values()) >= MUTATIONS // 2, refused


@FUZZ
@given(data=st.binary(max_size=2000))
@example(data=b"PAR1")
@example(data=b"PAR1" + bytes(8) + b"PAR1")
@example(data=b"PAR1" + struct.pack("<I", 2**31 - 1) + b"PAR1")
def test_rollout_file_random_bytes_refused(data: bytes) -> None:
    from intellect.verifier.rollouts import RolloutFile, RolloutFileError

    with pytest.raises(RolloutFileError, match="rollout file fuzzed"):
        RolloutFile.from_bytes(data, name="fuzzed")


def _v2_parts(data: bytes) -> tuple[dict[str, Any], bytes]:
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8:8 + n]), data[8 + n:]


def _v2_join(header: dict[str, Any], body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


@FUZZ
@given(meta=st.dictionaries(st.text(max_size=8) | st.sampled_from(["schema", "meta"]),
                            json_values | st.sampled_from(["intellect.rollouts/v2", "intellect.rollouts/v1", "{}"]),
                            max_size=4))
@example(meta={"schema": "\udcff"})
@example(meta={"\udcff": "x"})
@example(meta={"schema": "intellect.rollouts/v2", "meta": "[" * 5000})
@example(meta={"schema": "intellect.rollouts/v2", "meta": "{}"})
def test_rollout_file_garbage_metadata_refused(rollout_bytes, meta: dict[str, Any]) -> None:
    from intellect.verifier.rollouts import RolloutFile, RolloutFileError

    header, body = _v2_parts(rollout_bytes)
    header["__metadata__"] = meta
    text = json.dumps(header).encode("utf-8", "surrogatepass")  # lone surrogates: not UTF-8 once encoded
    with pytest.raises(RolloutFileError, match="rollout file fuzzed"):  # no valid RolloutMeta fits in 40 chars
        RolloutFile.from_bytes(struct.pack("<Q", len(text)) + text + body, name="fuzzed")


@FUZZ
@given(col=st.sampled_from(["problem_id", "prompt_ids", "completion_ids", "reward", "advantage", "policy_step",
                            "proofs", "worker", "target_length"]),
       value=json_values | st.binary(max_size=300))
def test_rollout_file_garbage_cell_refused_or_round_trips(rollout_bytes, col: str, value: Any) -> None:
    """A v2 file written with one garbage cell (the writer does not validate): refused, or read back."""
    from intellect.verifier.rollouts import RolloutFile, RolloutRow, _encode_v2

    good = RolloutFile.from_bytes(rollout_bytes)
    rows = [r.model_dump() for r in good.rows]
    rows[0][col] = value
    rf = object.__new__(RolloutFile)  # unchecked: a stranger's writer checks nothing
    rf.meta, rf.name, rf.rows = good.meta, "bad", [RolloutRow.model_construct(**r) for r in rows]
    try:
        data = _encode_v2(rf)
    except (TypeError, ValueError, OverflowError, AttributeError, UnicodeEncodeError):
        return  # the format cannot hold it in the column's dtype: nobody can send it
    _rollouts(data)


# ---------------------------------------------------------------------------------------------- TOPLOC proofs


@FUZZ
@given(data=st.binary(max_size=300) | st.binary(min_size=258, max_size=258))
@example(data=b"\x00\x00" + bytes(256))
@example(data=b"\xff\xff" + bytes(256))
@example(data=b"\x00\x01" + b"\xff" * 256)
def test_decode_proof_garbage_refused_or_round_trips(data: bytes) -> None:
    from intellect.verifier.toploc import ProofFormatError, decode_proof, encode_proof

    parsed = _parse_or_refuse(decode_proof, data, ProofFormatError)
    if parsed is not None:
        assert encode_proof(*parsed) == data
    else:
        assert len(data) != 258 or data[:2] in (b"\x00\x00",) or int.from_bytes(data[:2], "big") > 65497 \
            or any(int.from_bytes(data[i:i + 2], "big") >= 65497 for i in range(2, 258, 2))


def test_decode_proof_mutations_only_proof_format_error() -> None:
    from intellect.verifier.toploc import ProofFormatError, decode_proof, encode_proof

    good = encode_proof(65497, [i * 257 % 65497 for i in range(128)])
    refused = 0
    for _kind, data in _mutants(good, seed=18):
        parsed = _parse_or_refuse(decode_proof, data, ProofFormatError)
        if parsed is None:
            refused += 1
        else:
            assert encode_proof(*parsed) == data
    assert refused >= MUTATIONS // 2


@FUZZ
@given(proofs=st.lists(st.binary(min_size=258, max_size=258) | st.binary(max_size=10) | st.integers()
                       | st.none() | st.text(max_size=5), max_size=4))
def test_verify_proofs_garbage_never_raises(proofs: list[Any]) -> None:
    import torch

    from intellect.verifier.toploc import verify_proofs

    hidden = torch.randn(40, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    result = verify_proofs(hidden, proofs)
    assert result.ok is False
    assert result.reason is not None and result.detail


# ----------------------------------------------------------------------------------------------- attestations


def _good_attestation() -> dict[str, Any]:
    from intellect.agents.attestation import sign_attestation

    att = sign_attestation("0x" + "11" * 32, chain_id=31337, ledger="0x" + "22" * 20, submission_id=5,
                           rollouts_cid="bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am",
                           proofs_hash="0x" + "33" * 32, policy_step=2)
    return json.loads(att.model_dump_json(by_alias=True))


def _attestation(data: bytes, original: Any) -> Any:
    """The attestation, or None when refused (AttestationError naming the source) — parsing or verifying.
    One that is accepted and verifies must be the original: no tampered attestation passes."""
    from intellect.agents.attestation import Attestation, AttestationError

    def parse_and_verify(d: bytes) -> Attestation:
        att = Attestation.from_json(d, source="peer-fuzz")
        att.verify()
        return att

    try:
        att = parse_and_verify(data)
    except AttestationError as exc:
        assert str(exc)
        return None
    assert att == original, "a tampered attestation was accepted"
    return att


@FUZZ
@given(field=st.sampled_from(["schema", "chain_id", "ledger", "submission_id", "rollouts_cid", "proofs_hash",
                              "policy_step", "accepted", "validator", "signature", "extra"]),
       value=json_values)
@example(field="signature", value="0x" + "00" * 65)
@example(field="signature", value="0x" + "ff" * 65)
@example(field="validator", value="0x" + "00" * 20)
@example(field="chain_id", value=2**300)
@example(field="submission_id", value=2**256)
@example(field="submission_id", value="5")
def test_attestation_tampered_field_refused(field: str, value: Any) -> None:
    """Every change of a field is refused with AttestationError (parse or signature), except a value pydantic
    reads as the same one ("5" for 5): then the attestation is the original, unchanged."""
    from intellect.agents.attestation import Attestation, AttestationError

    doc = _good_attestation()
    original = Attestation.from_obj(doc)
    if doc.get(field) == value:
        return
    doc[field] = value
    _attestation(json.dumps(doc).encode(), original)  # as bytes from a peer
    try:  # as an already-parsed HTTP body
        att = Attestation.from_obj(doc, source="body")
        att.verify()
    except AttestationError:
        return
    assert att == original, "a tampered attestation was accepted"


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_attestation_nasty_json_refused(data: bytes) -> None:
    from intellect.agents.attestation import Attestation, AttestationError

    with pytest.raises(AttestationError, match="peer-nasty"):
        Attestation.from_json(data, source="peer-nasty")


def test_attestation_mutations_only_attestation_error() -> None:
    from intellect.agents.attestation import Attestation

    good = json.dumps(_good_attestation()).encode()
    original = Attestation.from_json(good)
    original.verify()
    refused = sum(_attestation(data, original) is None for _kind, data in _mutants(good, seed=19))
    assert refused >= MUTATIONS // 2


# ---------------------------------------------------------------------------------------------------- task sets


def _task_set(data: bytes) -> Any:
    """The task set, or None when refused with a TaskSetError naming it; an accepted one round-trips."""
    from intellect.verifier.tasks import TaskSet, TaskSetError

    ts = _parse_or_refuse(lambda d: TaskSet.from_bytes(d, name="cid-tasks"), data, TaskSetError, naming="cid-tasks")
    if ts is not None:
        back = TaskSet.from_bytes(ts.to_jsonl_bytes())
        assert back.tasks == ts.tasks and back.name == ts.name
    return ts


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_task_set_nasty_header_refused(data: bytes) -> None:
    from intellect.verifier.tasks import TaskSet, TaskSetError

    with pytest.raises(TaskSetError, match="cid-nasty"):
        TaskSet.from_bytes(data + b"\n" + b'{"id": "t1"}\n', name="cid-nasty")


@FUZZ
@given(lines=st.lists(st.binary(max_size=60) | json_values.map(lambda v: json.dumps(v).encode()), max_size=5))
def test_task_set_garbage_lines_refused_or_round_trips(lines: list[bytes]) -> None:
    from intellect.verifier.tasks import TASKSET_SCHEMA

    header = json.dumps({"schema": TASKSET_SCHEMA, "name": "fuzz"}).encode()
    _task_set(b"\n".join([header, *lines]))


def _good_task_set() -> Any:
    from intellect.verifier.tasks import Task, TaskSet

    return TaskSet([Task(id="m1", prompt="What is 2+3?", verifier="math", answer="5", difficulty=0.5),
                    Task(id="c1", prompt="Write f", verifier="code", tests=["assert f(1) == 2"], entry_point="f")],
                   name="good")


def test_task_set_mutations_only_task_set_error() -> None:
    good = _good_task_set().to_jsonl_bytes()
    refused = sum(_task_set(data) is None for _kind, data in _mutants(good, seed=20))
    assert refused >= MUTATIONS // 3


def test_task_set_parquet_mutations_only_task_set_error(tmp_path: Path) -> None:
    """Parquet task sets (local files from a dataset download), column names made non-UTF-8 included."""
    from intellect.verifier.tasks import TaskSet, TaskSetError

    good_path = _good_task_set().save(tmp_path / "good.parquet")
    good = good_path.read_bytes()
    names = [b"prompt", b"verifier", b"answer", b"tests", b"schema"]
    refused = 0
    for i, (_kind, data) in enumerate(_mutants(good, seed=21, count=MUTATIONS // 2, names=names)):
        path = tmp_path / f"m{i}.parquet"
        path.write_bytes(data)
        ts = _parse_or_refuse(TaskSet.load, path, TaskSetError, naming=str(path))
        refused += ts is None
        if ts is not None:
            assert TaskSet.from_bytes(ts.to_jsonl_bytes()).tasks == ts.tasks
    assert refused >= MUTATIONS // 8


def test_dataset_loaders_garbage_only_task_set_error(tmp_path: Path) -> None:
    """Downloaded dataset files (NuminaMath / Deepscaler / SYNTHETIC-1 shapes) that are garbage: TaskSetError
    naming the file, or a task set of the rows that could be checked."""
    from intellect.agents.tasks import load_deepscaler, load_numinamath, load_synthetic1
    from intellect.verifier.tasks import TaskSetError

    good_rows = [{"problem": "What is 3*4?", "answer": "12", "prompt": "Define f", "task_type": "verifiable_code",
                  "verification_info": json.dumps({"language": "python", "test_cases": [
                      {"type": "function_call", "fn_name": "f", "input": [1], "output": [2]}]})},
                 {"problem": "2+2?", "answer": "4", "task_type": "verifiable_math",
                  "verification_info": {"ground_truth": "4"}}]
    good = "\n".join(json.dumps(r) for r in good_rows).encode()
    extra = [b"[1, 2, 3]", b'"a row"', b'{"problem": "x", "answer": ' + b"9" * 5000 + b"}",
             b'{"verification_info": "' + b"[" * 3000 + b'", "task_type": "code", "prompt": "p"}',
             b'{"task_type": "code", "prompt": "p", "verification_info": {"test_cases": 5}}',
             b'{"task_type": "code", "prompt": "p", "verification_info": {"test_cases": ["x"]}}']
    cases = [data for _kind, data in _mutants(good, seed=22, count=MUTATIONS // 2)] + extra
    for i, data in enumerate(cases):
        for loader in (load_numinamath, load_deepscaler, load_synthetic1):
            path = tmp_path / f"d{i}.jsonl"
            path.write_bytes(data)
            with contextlib.suppress(TaskSetError):  # "kept no task" is a TaskSetError too
                ts, _report = loader(path)
                assert len(ts) >= 1


# --------------------------------------------------------------------------------------------------- configs

_GOOD_CONFIG = b"""role: worker
data_dir: /tmp/agent
chain:
  network: development
  rpc_url: http://127.0.0.1:8545
worker:
  group_size: 4
  problems_per_task: 2
server:
  port: 8000
tasks:
  source: synthetic:16:1
  budgets: {cpu: [64, 128]}
"""


def _config(tmp_path: Path, text: bytes) -> Any:
    from intellect.agents.config import AgentConfig, ConfigError, load_config

    path = tmp_path / "agent.yaml"
    path.write_bytes(text)
    cfg = _parse_or_refuse(lambda p: load_config(p, env={}), path, ConfigError, naming="config")
    if cfg is not None:
        assert AgentConfig.model_validate(cfg.model_dump()) == cfg
    return cfg


@FUZZ
@given(text=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
@example(text=b"\xff\xfe role: worker")
@example(text=b"role: [" * 2000)
@example(text=b"&a [*a]")
@example(text=b"role: worker\nworker: 3")
@example(text=b"role: worker\nchain: {rpc_url: 5}")
@example(text=b"role: worker\ndata_dir: 2001-02-30")
def test_load_config_garbage_refused_or_valid(tmp_path_factory, text: bytes) -> None:
    _config(tmp_path_factory.mktemp("cfg"), text)


def test_load_config_mutations_only_config_error(tmp_path: Path) -> None:
    assert _config(tmp_path, _GOOD_CONFIG) is not None
    # PyYAML (pure Python) needs ~1 s for a 900-deep flow sequence before its RecursionError: shallower
    # nests keep this loop fast; the hypothesis test above keeps a 2000-deep one
    mutants = _mutants(_GOOD_CONFIG, seed=23, depths=(20, 60, 200))
    refused = sum(_config(tmp_path, data) is None for _kind, data in mutants)
    assert refused >= MUTATIONS // 4


@FUZZ
@given(key=st.text(max_size=30), value=st.text(max_size=30))
@example(key="worker.group_size.x", value="1")
@example(key="", value="1")
@example(key="..", value="1")
@example(key="worker.model", value="[" * 5000)
@example(key="data_dir", value="2001-02-30")
def test_load_config_garbage_overrides_refused_or_valid(key: str, value: str) -> None:
    from intellect.agents.config import AgentConfig, ConfigError, load_config

    cfg = _parse_or_refuse(lambda o: load_config(None, overrides=o, env={}), {"role": "worker", key: value},
                           ConfigError)
    if cfg is not None:
        assert AgentConfig.model_validate(cfg.model_dump()) == cfg


# ---------------------------------------------------------------------------------------------- deployment file

DEPLOYMENT = {"schema": "intellect.deployment/v1", "chainId": 31337, "contracts": {
    "IntellectToken": "0x" + "01" * 20, "NodeRegistry": "0x" + "02" * 20, "StakeManager": "0x" + "03" * 20,
    "TaskLedger": "0x" + "04" * 20}}
"""A deployment document of four made-up addresses (decoding needs only the ABIs and addresses)."""


def test_deployment_file_mutations_only_its_errors(tmp_path: Path) -> None:
    from intellect.sdk import ConfigError, Deployment, SchemaVersionError, load_deployment

    good = json.dumps({**DEPLOYMENT, "deployBlock": 3}).encode()
    path = tmp_path / "31337.json"
    refused = 0
    for _kind, data in [("good", good), *_mutants(good, seed=24)]:
        path.write_bytes(data)
        dep = _parse_or_refuse(lambda p: load_deployment(path=p), path, (ConfigError, SchemaVersionError),
                               naming="deployment")
        refused += dep is None
        if dep is not None:
            assert Deployment.model_validate(dep.model_dump(by_alias=True)) == dep
    assert refused >= MUTATIONS // 3


# ------------------------------------------------------------------------------------------ peers' documents


def test_peer_status_mutations_only_peer_document_error() -> None:
    from intellect.agents.roles._runtime import PeerDocumentError, parse_status, peer_service

    good = json.dumps({"role": "worker", "node": "0x" + "ab" * 20, "services": {
        "status": "http://10.0.0.2:8000/status", "ipfs": "http://10.0.0.2:8081"}}).encode()
    cases = [data for _kind, data in _mutants(good, seed=25)] + NASTY_JSON + [b'{"services": [1]}',
                                                                              b'{"services": {"ipfs": 5}}']
    refused = 0
    for data in cases:
        doc = _parse_or_refuse(lambda d: parse_status(d, "http://peer/status"), data, PeerDocumentError,
                               naming="http://peer/status")
        refused += doc is None
        if doc is not None:
            url = peer_service(doc, "ipfs")
            assert url is None or (isinstance(url, str) and url.startswith(("http://", "https://")))
    assert refused >= MUTATIONS // 3


# ------------------------------------------------------------------------------------- RPC responses (SDK)


@pytest.fixture(scope="module")
def protocol():
    """A Protocol over a Web3 with no provider: decoding needs only the ABIs and addresses."""
    from web3 import Web3

    from intellect.sdk import Deployment, Protocol

    dep = Deployment.model_validate(DEPLOYMENT)
    return Protocol(Web3(), dep)


@FUZZ
@given(data=st.binary(max_size=200) | st.text(max_size=50) | st.none())
def test_error_decoder_garbage_revert_data_decoded(protocol, data: Any) -> None:
    from intellect.sdk import ContractRevert

    out = protocol.decoder.decode(data, function="f", contract="TaskLedger", message="execution reverted")
    assert isinstance(out, ContractRevert)


@FUZZ
@given(selector_of=st.sampled_from(["TaskLedgerWindowClosed(uint256,uint256)", "TaskLedgerInvalidPoolParam(string)",
                                    "StakeManagerNotOwner(address,address)"]),
       tail=st.binary(max_size=130))
def test_error_decoder_truncated_args_keep_the_name(protocol, selector_of: str, tail: bytes) -> None:
    from eth_utils import keccak

    out = protocol.decoder.decode(keccak(text=selector_of)[:4] + tail, function="f", contract="TaskLedger")
    assert out.name == selector_of.split("(")[0]


def _log(protocol, topics: list[bytes], data: bytes) -> dict[str, Any]:
    return {"address": protocol.contracts["TaskLedger"].address, "topics": topics, "data": data,
            "blockNumber": 7, "blockHash": b"\x01" * 32, "logIndex": 0, "transactionHash": b"\x02" * 32,
            "transactionIndex": 0, "removed": False}


@FUZZ
@given(event=st.sampled_from(["WorkSubmitted", "ChallengeOpened", "TaskClaimed", "CheckpointPublished",
                              "VoteCast", "RewardClaimed"]),
       extra_topics=st.lists(st.binary(min_size=32, max_size=32), max_size=4),
       data=st.binary(max_size=400))
def test_decode_log_garbage_refused_with_rpc_error(protocol, event: str, extra_topics: list[bytes],
                                                   data: bytes) -> None:
    """A lying or broken RPC node returns a log at the ledger's address with a known topic but garbage
    topics/data: decoding raises the SDK's RpcError naming the log, never web3's internal errors."""
    from intellect.sdk import RpcError

    topic0 = next(t for t, (c, e) in protocol._topics.items() if c == "TaskLedger" and e == event)
    try:
        ev = protocol.decode_log(_log(protocol, [topic0, *extra_topics], data))
    except RpcError as exc:
        assert event in str(exc)
        return
    assert ev is not None and ev.event == event


def test_decode_log_malformed_shapes_rpc_error(protocol) -> None:
    """Logs whose very shape is wrong (missing keys, topics of the wrong type): RpcError, never KeyError."""
    from intellect.sdk import RpcError

    topic0 = next(t for t, (c, e) in protocol._topics.items() if c == "TaskLedger" and e == "WorkSubmitted")
    address = protocol.contracts["TaskLedger"].address
    for lg in [{}, {"address": address}, {"address": address, "topics": 5}, {"address": address, "topics": [None]},
               {"address": address, "topics": [topic0]}, [], None,
               {**_log(protocol, [topic0], b""), "blockNumber": "x"}]:
        with pytest.raises(RpcError):
            protocol.decode_log(lg)
    assert protocol.decode_log({"address": address, "topics": [7]}) is None  # a topic of no event of ours


# ----------------------------------------------------------------------------------- lying servers (real HTTP)


class _Liar:
    """A real HTTP server on loopback that answers every request with `answer(path, body)` -> (status, bytes)."""

    def __init__(self, answer: Callable[[str, bytes], tuple[int, bytes]]) -> None:
        outer = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, out = outer.answer(self.path, body)
                self.reply(status, out, "application/json")

            do_GET = do_POST

        self.answer = answer
        self.server = HttpServer(Handler, name="liar")
        self.url = self.server.url

    def __enter__(self) -> _Liar:
        self.server.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.server.stop()


def _rpc_answers(rnd: random.Random, request: bytes) -> bytes:
    """A JSON-RPC answer a broken or lying node might give: garbage, a wrong shape, a wrong id, random results."""
    try:
        req_id = json.loads(request).get("id", 1)
    except (ValueError, AttributeError):
        req_id = 1
    words = "".join(f"{rnd.choice([0, 1, 5, 200, 2**64]):064x}" for _ in range(rnd.randrange(4, 40)))
    value = rnd.choice([None, 0, -1, 2**300, "0x", "0x" + rnd.randbytes(rnd.randrange(0, 200)).hex(), "zz", [],
                        {}, {"number": "0x1"}, [{"address": 5}], 1.5, True, "0x" + "f" * 5000,
                        "0x" + words])
    if rnd.random() < 0.4:  # a well-formed answer of well-formed ABI words that no contract of ours returns
        return json.dumps({"jsonrpc": "2.0", "id": req_id, "result": "0x" + words}).encode()
    return rnd.choice([
        rnd.randbytes(rnd.randrange(0, 64)),
        b"[" * 5000,
        b'{"jsonrpc": "2.0", "id": ' + json.dumps(req_id).encode() + b', "result": ' + b"9" * 5000 + b"}",
        json.dumps({"jsonrpc": "2.0", "id": req_id, "result": value}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": req_id + 1 if isinstance(req_id, int) else 0, "result": "0x1"}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": req_id, "error": {"code": 3, "message": "execution reverted",
                                                              "data": value}}).encode(),
        json.dumps({"jsonrpc": "2.0", "id": req_id, "error": value}).encode(),
        json.dumps([{"jsonrpc": "2.0", "id": req_id, "result": "0x1"}]).encode(),
    ])


def test_protocol_lying_rpc_node_only_sdk_errors() -> None:
    """A Protocol talking to a node that answers garbage: every view, event query and block read either
    returns or raises RpcError / ContractRevert (the SDK's own errors), never web3's, requests' or json's."""
    from web3 import HTTPProvider, Web3

    from intellect.sdk import ContractRevert, Deployment, Protocol, RetryPolicy, RpcError

    rnd = random.Random(26)
    dep = Deployment.model_validate(DEPLOYMENT)
    calls: list[Callable[[Protocol], Any]] = [
        lambda p: p.pool_count(), lambda p: p.pool(1), lambda p: p.task(1), lambda p: p.challenge_info(1),
        lambda p: p.node("0x" + "05" * 20), lambda p: p.stake_of("0x" + "05" * 20), lambda p: p.block_number(),
        lambda p: p.chain_time(), lambda p: p.eth_balance("0x" + "05" * 20), lambda p: p.latest_step(1),
        lambda p: p.get_events(["WorkSubmitted"], from_block=0, to_block=3), lambda p: p.checkpoint(1, 2),
    ]
    outcomes: dict[str, int] = {}
    with _Liar(lambda _path, body: (200, _rpc_answers(rnd, body))) as liar:
        w3 = Web3(HTTPProvider(liar.url, request_kwargs={"timeout": 5}, exception_retry_configuration=None))
        p = Protocol(w3, dep, retry=RetryPolicy(attempts=1))
        for i in range(MUTATIONS // 2):
            try:
                calls[i % len(calls)](p)
                outcome = "returned"
            except (RpcError, ContractRevert) as exc:
                assert str(exc)
                outcome = type(exc).__name__
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert outcomes.get("RpcError", 0) >= MUTATIONS // 8, outcomes


def test_protocol_out_of_range_view_values_refused() -> None:
    """A node answering every view with well-formed ABI words whose enum fields are out of range (status 200):
    refused with RpcError naming the view, not ValueError from the enum."""
    from web3 import HTTPProvider, Web3

    from intellect.sdk import Deployment, Protocol, RetryPolicy, RpcError

    words = "".join(f"{x:064x}" for x in [1, 200, 200, 200, 200, 200, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0])

    def answer(_path: str, body: bytes) -> tuple[int, bytes]:
        return 200, json.dumps({"jsonrpc": "2.0", "id": json.loads(body)["id"], "result": "0x" + words}).encode()

    dep = Deployment.model_validate(DEPLOYMENT)
    with _Liar(answer) as liar:
        p = Protocol(Web3(HTTPProvider(liar.url, request_kwargs={"timeout": 5})), dep, retry=RetryPolicy(attempts=1))
        for view, call in [("TaskLedger.task", lambda: p.task(1)), ("TaskLedger.challengeInfo", lambda: p.challenge_info(1)),
                           ("NodeRegistry.nodeCore", lambda: p.node_core("0x" + "05" * 20))]:
            with pytest.raises(RpcError, match=view):
                call()


def test_kubo_lying_daemon_only_ipfs_errors() -> None:
    """A Kubo RPC API answering garbage (error pages, add lines without a hash, wrong blocks, huge bodies):
    only IpfsError (and its subclasses) come out of the Kubo client."""
    from intellect.sdk import IpfsError
    from intellect.sdk.ipfs import KuboIpfs

    rnd = random.Random(27)

    def answer(_path: str, _body: bytes) -> tuple[int, bytes]:
        status = rnd.choice([200, 200, 200, 500, 404])
        body = rnd.choice([rnd.randbytes(rnd.randrange(0, 300)), b"[" * 5000, b'{"Message": 5}', b"[1, 2]",
                           b'{"Hash": 7}\n{"Hash": "not a cid"}', b'{"Hash": "' + b"b" * 5000 + b'"}',
                           b'{"Version": {"a": 1}}', b'{"Message": "' + b"\xff" * 10 + b'"}', b"\xff\xfe"])
        return status, body

    data = b"hello fuzz"
    with _Liar(answer) as liar:
        kubo = KuboIpfs(liar.url, timeout=5)
        cid = str(Cid.of(data))
        ops: list[Callable[[], Any]] = [lambda: kubo.add(data), lambda: kubo.cat(cid), lambda: kubo.version(),
                                        lambda: kubo.get_block(cid), lambda: kubo.pin(cid), lambda: kubo.has(cid)]
        refused = 0
        for i in range(MUTATIONS // 2):
            try:
                out = ops[i % len(ops)]()
            except IpfsError as exc:
                assert str(exc)
                refused += 1
                continue
            if i % len(ops) in (1, 3):  # cat / get_block: only the true bytes can come back
                assert out == data
    assert refused >= MUTATIONS // 8

