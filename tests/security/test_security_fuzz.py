"""Bad-input fuzzing (hypothesis) of every parser that reads data from another machine: shard manifests,
CIDs and dag-pb blocks, rollout files, TOPLOC proofs, attestations, task sets, agent configs, revert data and
event logs from an RPC node. Each must refuse bad input with its own clear error type (never an unrelated
exception), and a good input parsed before and after the garbage still parses the same (no state lost).

The default run keeps `max_examples` modest; INTELLECT_FUZZ_EXAMPLES raises it (the slow job uses 2000)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from intellect.sdk import IntellectError
from intellect.sdk.ipfs._cid import Cid
from intellect.sdk.ipfs._unixfs import decode_node
from intellect.sdk.shardcast import Manifest, ManifestError, build_shards

EXAMPLES = int(os.environ.get("INTELLECT_FUZZ_EXAMPLES", "60"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# inputs that break naive JSON readers: deep nesting (RecursionError), huge integers (ValueError: int digits)
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


# ------------------------------------------------------------------------------------------------- manifests


@pytest.fixture(scope="module")
def manifest_bytes(tmp_path_factory) -> bytes:
    d = tmp_path_factory.mktemp("ckpt")
    (d / "model.safetensors").write_bytes(random.Random(1).randbytes(3000))
    (d / "config.json").write_text('{"model_type": "llama"}')
    return build_shards(d, d.parent / "shards", step=3, model_name="tiny", shard_size=1000).to_bytes()


def _manifest_refuses(data: bytes) -> None:
    try:
        Manifest.from_bytes(data)
    except ManifestError:
        pass
    except IntellectError:  # UnknownSchemaVersionError (a SchemaVersionError)
        pass


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_manifest_from_bytes_nasty_json_refused(data: bytes) -> None:
    _manifest_refuses(data)


@FUZZ
@given(seed=st.integers(0, 2**32), n=st.integers(1, 8))
def test_manifest_from_bytes_mutated_refused_or_valid(manifest_bytes, seed: int, n: int) -> None:
    data = _mutate(manifest_bytes, random.Random(seed), n)
    _manifest_refuses(data)
    assert Manifest.from_bytes(manifest_bytes).to_bytes() == manifest_bytes  # the good one still parses


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(["schema", "model_name", "step", "created_at", "shard_size",
                                             "total_size", "files", "shards", "total_sha256", "root_sha256",
                                             "relay_hints", "extra"]), json_values, max_size=12))
def test_manifest_from_obj_random_fields_refused(doc: dict[str, Any]) -> None:
    doc.setdefault("schema", "intellect.shardcast.manifest/v1")
    with pytest.raises(IntellectError):
        Manifest.from_bytes(json.dumps(doc).encode())


# ------------------------------------------------------------------------------------------------------ CIDs


@FUZZ
@given(text=st.text(max_size=80) | st.from_regex(r"\A(b[a-z2-7]{0,70}|Qm[1-9A-HJ-NP-Za-km-z]{44}|z[1-9A-Za-z]{0,60})\Z"))
@example(text="Qm" + "0" * 44)
@example(text="b")
@example(text="bafkrei")
@example(text="z")
def test_cid_parse_garbage_refused(text: str) -> None:
    from intellect.sdk._errors import InvalidCidError

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
def test_cid_from_bytes_garbage_refused(raw: bytes) -> None:
    from intellect.sdk._errors import InvalidCidError

    with contextlib.suppress(InvalidCidError):
        Cid.from_bytes(raw)


@FUZZ
@given(block=st.binary(max_size=300))
@example(block=b"\x12\x05\x0a\x03abc")
@example(block=b"\x0a\xff\xff\xff\xff\x0f")
def test_decode_node_garbage_refused(block: bytes) -> None:
    from intellect.sdk._errors import IpfsError

    with contextlib.suppress(IpfsError):
        decode_node(block)


def test_embedded_ipfs_garbage_reads_lose_nothing(tmp_path: Path) -> None:
    """Garbage CIDs and unknown content against a store: clear errors, and the stored content survives."""
    from intellect.sdk._errors import IpfsError
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
    from intellect.agents.rollouts import RolloutFile, RolloutMeta, RolloutRow

    rows = [RolloutRow(problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 40)), reward=0.9,
                       task_reward=1.0, length_penalty=0.1, target_length=64, advantage=0.5 * (k - 1),
                       policy_step=7, proofs=[bytes(258), bytes(258)], worker=WORKER)
            for p in range(2) for k in range(2)]
    meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=WORKER, policy_step=7, group_size=2)
    return RolloutFile(meta, rows, name="fuzz").to_bytes()


def _rollouts_refuse(data: bytes) -> None:
    from intellect.agents.rollouts import RolloutFile, RolloutFileError

    try:
        RolloutFile.from_bytes(data, name="fuzzed")
    except RolloutFileError as exc:
        assert "fuzzed" in str(exc)


@FUZZ
@given(seed=st.integers(0, 2**32), n=st.integers(1, 6))
def test_rollout_file_mutated_bytes_refused(rollout_bytes, seed: int, n: int) -> None:
    _rollouts_refuse(_mutate(rollout_bytes, random.Random(seed), n))


@FUZZ
@given(data=st.binary(max_size=2000))
@example(data=b"PAR1")
@example(data=b"PAR1" + bytes(8) + b"PAR1")
def test_rollout_file_random_bytes_refused(data: bytes) -> None:
    _rollouts_refuse(data)


@FUZZ
@given(meta=st.dictionaries(st.binary(max_size=8) | st.sampled_from([b"schema", b"meta"]),
                            st.binary(max_size=40) | st.sampled_from([b"intellect.rollouts/v1", b"{}", b"\xff"]),
                            max_size=4))
@example(meta={b"schema": b"\xff\xfe"})
@example(meta={b"\xff": b"x"})
@example(meta={b"schema": b"intellect.rollouts/v1", b"meta": b"[" * 5000})
def test_rollout_file_garbage_metadata_refused(rollout_bytes, meta: dict[bytes, bytes]) -> None:
    table = pq.read_table(pa.BufferReader(rollout_bytes)).replace_schema_metadata(meta)
    buf = io.BytesIO()
    pq.write_table(table, buf)
    _rollouts_refuse(buf.getvalue())


@FUZZ
@given(col=st.sampled_from(["problem_id", "prompt_ids", "completion_ids", "reward", "advantage", "policy_step",
                            "proofs", "worker", "target_length"]),
       value=json_values | st.binary(max_size=300))
def test_rollout_file_garbage_cell_refused(rollout_bytes, col: str, value: Any) -> None:
    table = pq.read_table(pa.BufferReader(rollout_bytes))
    rows = table.to_pylist()
    rows[0][col] = value
    buf = io.BytesIO()
    try:
        pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), buf)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
        return  # arrow itself cannot hold it in the column's type: nobody can send it
    _rollouts_refuse(buf.getvalue())


# ---------------------------------------------------------------------------------------------- TOPLOC proofs


@FUZZ
@given(data=st.binary(max_size=300) | st.binary(min_size=258, max_size=258))
@example(data=b"\x00\x00" + bytes(256))
@example(data=b"\xff\xff" + bytes(256))
@example(data=b"\x00\x01" + b"\xff" * 256)
def test_decode_proof_garbage_refused(data: bytes) -> None:
    from intellect.verifier.toploc import ProofFormatError, decode_proof

    with contextlib.suppress(ProofFormatError):
        decode_proof(data)


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


@FUZZ
@given(field=st.sampled_from(["schema", "chain_id", "ledger", "submission_id", "rollouts_cid", "proofs_hash",
                              "policy_step", "accepted", "validator", "signature", "extra"]),
       value=json_values)
@example(field="signature", value="0x" + "00" * 65)
@example(field="signature", value="0x" + "ff" * 65)
@example(field="validator", value="0x" + "00" * 20)
def test_attestation_tampered_field_refused(field: str, value: Any) -> None:
    from intellect.agents.attestation import Attestation, AttestationError

    doc = _good_attestation()
    if doc.get(field) == value:
        return
    doc[field] = value
    with pytest.raises((ValidationError, AttestationError)):
        Attestation.model_validate(doc).verify()


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_attestation_nasty_json_refused(data: bytes) -> None:
    from intellect.agents.attestation import Attestation

    with pytest.raises(ValidationError):
        Attestation.model_validate_json(data)


# ---------------------------------------------------------------------------------------------------- task sets


@pytest.mark.parametrize("data", NASTY_JSON, ids=range(len(NASTY_JSON)))
def test_task_set_nasty_header_refused(data: bytes) -> None:
    from intellect.verifier.tasks import TaskSet, TaskSetError

    with pytest.raises(TaskSetError):
        TaskSet.from_bytes(data + b"\n" + b'{"id": "t1"}\n')


@FUZZ
@given(lines=st.lists(st.binary(max_size=60) | json_values.map(lambda v: json.dumps(v).encode()), max_size=5))
def test_task_set_garbage_lines_refused(lines: list[bytes]) -> None:
    from intellect.verifier.tasks import TASKSET_SCHEMA, TaskSet, TaskSetError

    header = json.dumps({"schema": TASKSET_SCHEMA, "name": "fuzz"}).encode()
    with contextlib.suppress(TaskSetError):
        TaskSet.from_bytes(b"\n".join([header, *lines]))


# --------------------------------------------------------------------------------------------------- configs


@FUZZ
@given(text=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
@example(text=b"\xff\xfe role: worker")
@example(text=b"role: [" * 2000)
@example(text=b"&a [*a]")
@example(text=b"role: worker\nworker: 3")
@example(text=b"role: worker\nchain: {rpc_url: 5}")
def test_load_config_garbage_refused(tmp_path_factory, text: bytes) -> None:
    from intellect.agents.config import ConfigError, load_config

    path = tmp_path_factory.mktemp("cfg") / "agent.yaml"
    path.write_bytes(text)
    try:
        load_config(path, env={})
    except ConfigError as exc:
        assert str(path) in str(exc) or "config" in str(exc)


@FUZZ
@given(key=st.text(max_size=30), value=st.text(max_size=30))
@example(key="worker.group_size.x", value="1")
@example(key="", value="1")
@example(key="..", value="1")
@example(key="worker.model", value="[" * 5000)
def test_load_config_garbage_overrides_refused(key: str, value: str) -> None:
    from intellect.agents.config import ConfigError, load_config

    with contextlib.suppress(ConfigError):
        load_config(None, overrides={"role": "worker", key: value}, env={})


# ------------------------------------------------------------------------------------- RPC responses (SDK)


@pytest.fixture(scope="module")
def protocol():
    """A Protocol over a Web3 with no provider: decoding needs only the ABIs and addresses."""
    from web3 import Web3

    from intellect.sdk import Deployment, Protocol

    dep = Deployment.model_validate({"schema": "intellect.deployment/v1", "chainId": 31337, "contracts": {
        "IntellectToken": "0x" + "01" * 20, "NodeRegistry": "0x" + "02" * 20, "StakeManager": "0x" + "03" * 20,
        "TaskLedger": "0x" + "04" * 20}})
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
