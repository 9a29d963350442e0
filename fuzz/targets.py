"""The fuzz targets: one function per reader of bytes that arrive from another node.

Each `Reader.target(data)` feeds `data` to the reader the way the node does and returns normally when the
reader accepted it or refused it with one of its documented errors (`Reader.expected`). Anything else that
escapes — another exception type, an accepted document that does not survive its own round trip — is a
finding: the harnesses (fuzz/fuzz_<reader>.py, under atheris) report it as a crash, and the default tests
(tests/fuzz_regressions/test_fuzz_replay.py, no atheris needed) replay every seed and regression input through
the same functions.

`Reader.seeds()` makes the seed corpus (fuzz/corpus/<reader>/) with the project's own writers
(`python fuzz/make_corpus.py` rewrites it). Rollout files of the Parquet format (v1) are not fuzzed in-process:
pyarrow can abort the process, so the node reads them in a child (issue 32); the v2 reader is pure Python.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

# Module-level imports of `intellect` on purpose: a harness imports this module inside
# `atheris.instrument_imports()`, so that every reader's Python code is instrumented for coverage.
from pydantic import ValidationError

from intellect.agents.attestation import Attestation, AttestationError, sign_attestation
from intellect.agents.roles import attestation_intake
from intellect.agents.roles._runtime import PeerDocumentError, parse_status, peer_service
from intellect.agents.roles._server import HttpError, parse_json_body
from intellect.agents.roles.store import accept_pushed_file, store_request
from intellect.sdk import IpfsError, SchemaVersionError
from intellect.sdk.attestation_root import AttestationRootError, AttestationRootFile
from intellect.sdk.ipfs import DAG_PB, RAW, Cid, Link, decode_node, encode_node, read_dag
from intellect.sdk.network import NetworkDescriptorError, parse_network, sign_network
from intellect.sdk.poolrules import PoolRules, PoolRulesError
from intellect.sdk.shardcast import Manifest, ManifestError
from intellect.verifier import rewards as _rewards
from intellect.verifier.difficulty import DifficultyError, DifficultyTable, weights
from intellect.verifier.rollouts import RolloutFile, RolloutFileError, RolloutMeta, RolloutRow
from intellect.verifier.tasks import Task, TaskSet, TaskSetError, adaptive_problems, assign_problems
from intellect.verifier.toploc import ProofFormatError, decode_proof, encode_proof

__all__ = ["READERS", "Finding", "Reader"]

#: a fixed, public test key (anvil's first account): seeds only, never a secret
TEST_KEY = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
CHAIN_ID = 31337
LEDGER = "0x5FbDB2315678afecb367f032d93F642f64180aa3"


class Finding(AssertionError):
    """An accepted input broke an invariant the reader promises (e.g. its own round trip)."""


@dataclass(frozen=True)
class Reader:
    name: str
    what: str
    target: Callable[[bytes], None]
    expected: tuple[type[BaseException], ...]
    seeds: Callable[[], dict[str, bytes]]
    prepare: Callable[[], Any] | None = None
    """Imports a harness makes under instrumentation besides this module's (readers whose module is heavy)."""


def _refused(fn: Callable[[], Any], expected: tuple[type[BaseException], ...]) -> Any:
    """`fn()`, or None when it raised one of `expected` (with a message: a refusal must say why)."""
    try:
        return fn()
    except expected as exc:
        if not str(exc):
            raise Finding(f"{type(exc).__name__} raised without a message") from exc
        return None


# ------------------------------------------------------------------------------------------ rollout files

ROLLOUT_ERRORS = (RolloutFileError,)


def rollouts_target(data: bytes) -> None:
    """A rollout file as a validator or the trainer fetches it (`RolloutFile.from_bytes`), format v2: parsed
    in-process by pure Python + numpy. Bytes that start with Parquet's magic go to the v1 reader in a child
    process (pyarrow can abort its process: it is not fuzzed in this one)."""
    if bytes(data[:4]) == b"PAR1":
        return
    rf = _refused(lambda: RolloutFile.from_bytes(data, name="fuzz"), ROLLOUT_ERRORS)
    if rf is None:
        return
    again = RolloutFile.from_bytes(rf.to_bytes(), name="fuzz round trip")
    if again.meta != rf.meta or again.rows != rf.rows:
        raise Finding("an accepted rollout file does not round-trip through to_bytes")
    rf.summary()


def rollouts_seeds() -> dict[str, bytes]:
    worker = "0x" + "ab" * 20

    def make(groups: int, size: int, tokens: int, *, proofs: bool = True, topk: int = 4, pid: str = "p",
             target: int | None = 64, chunk: int = 8) -> bytes:
        rows = [RolloutRow(problem_id=f"{pid}{g}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                           reward=0.9, task_reward=1.0, length_penalty=0.1, target_length=target if k else None,
                           advantage=0.5 * (k - 1), policy_step=7, worker=worker,
                           proofs=[bytes([g, k]) + bytes(2 * topk)] * ((tokens + chunk - 1) // chunk) if proofs else [])
                for g in range(groups) for k in range(size)]
        meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=worker, policy_step=7,
                           group_size=size, proof_chunk_size=chunk, proof_topk=topk, length_alpha=0.001)
        return RolloutFile(meta, rows, name="seed").to_bytes()

    return {
        "two_groups_of_three": make(2, 3, 20),
        "one_row": make(1, 1, 5, target=None),
        "no_proofs": make(2, 2, 12, proofs=False),
        "empty_completion": make(1, 2, 0, proofs=False),
        "unicode_ids": make(2, 2, 9, pid="é-問題-"),
        "not_rollouts": b"\x10\x00\x00\x00\x00\x00\x00\x00" + b'{"a": 1}        ',
        "huge_header_length": b"\xff" * 8 + b"{}",
    }


# ---------------------------------------------------------------------------------------------- manifests

MANIFEST_ERRORS = (ManifestError,)


def manifest_target(data: bytes) -> None:
    m = _refused(lambda: Manifest.from_bytes(data, source="fuzz"), MANIFEST_ERRORS)
    if m is None:
        return
    again = Manifest.from_bytes(m.to_bytes())
    if again != m or again.id != m.id:
        raise Finding("an accepted manifest does not round-trip through to_bytes")
    for shard in m.shards:  # what a downloader does with it
        if sum(n for _, _, n in m.segments(shard)) != shard.size:
            raise Finding(f"segments of shard {shard.index} do not add up to its size")


def manifest_seeds() -> dict[str, bytes]:
    import random
    import tempfile
    from datetime import UTC, datetime
    from pathlib import Path

    from intellect.sdk.shardcast import build_shards

    out: dict[str, bytes] = {}
    rnd = random.Random(32)
    with tempfile.TemporaryDirectory() as tmp:
        for name, files, shard in [
            ("one_file", {"model.safetensors": 3000}, 1000),
            ("nested", {"config.json": 40, "sub/a.bin": 700, "sub/b.bin": 0, "tok/vocab.txt": 90}, 256),
            ("single_shard", {"w": 10}, 4096),
            ("empty_file", {"empty": 0}, 64),
        ]:
            ckpt = Path(tmp) / name
            for rel, size in files.items():
                (ckpt / rel).parent.mkdir(parents=True, exist_ok=True)
                (ckpt / rel).write_bytes(rnd.randbytes(size))
            m = build_shards(ckpt, Path(tmp) / f"{name}.shards", step=3, model_name="tiny", shard_size=shard,
                             relay_hints=["http://127.0.0.1:8000"] if name == "nested" else ())
            out[name] = m.model_copy(update={"created_at": datetime(2026, 11, 27, tzinfo=UTC)}).to_bytes()
    doc = json.loads(out["one_file"])
    out["wrong_schema"] = json.dumps({**doc, "schema": "intellect.shardcast.manifest/v2"}).encode()
    out["deep"] = b'{"schema":"intellect.shardcast.manifest/v1","files":' + b"[" * 5000 + b"]" * 5000 + b"}"
    out["huge_int"] = json.dumps({**doc, "step": 0}).encode().replace(b'"step":0', b'"step":' + b"9" * 5000)
    return out


# --------------------------------------------------------------------------------------------- pool rules

POOLRULES_ERRORS = (PoolRulesError, SchemaVersionError)


def poolrules_target(data: bytes) -> None:
    rules = _refused(lambda: PoolRules.from_bytes(data, source="fuzz"), POOLRULES_ERRORS)
    PoolRules.is_rules_document(data)
    if rules is None:
        return
    again = PoolRules.from_bytes(rules.to_bytes(), source="fuzz round trip")
    if again != rules:
        raise Finding("accepted pool rules do not round-trip through to_bytes")
    # what agents compute from the rules at start
    for cls in ("cpu", "gpu-small", "gpu-large", "unknown"):
        rules.budgets_for(cls)
    _ = (rules.full_submission_units, rules.effective_class_history, rules.effective_class_lease_share)
    rules.new_document_problems()


def poolrules_seeds() -> dict[str, bytes]:
    from intellect.sdk.poolrules import ModelRules

    base = dict(taskset_cid="bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am",
                model=ModelRules(family="smollm2-135m"), group_size=8, problems_per_task=2,
                budgets={"cpu": [64, 128]}, length_alpha=0.001, max_units_per_submission=4096)
    out = {
        "minimal": PoolRules(**base).to_bytes(),
        "all_fields": PoolRules(**{**base, "heldout_cid": "bafkreiheldout", "budgets": {
            "cpu": [64], "gpu-small": [128, 256], "gpu-large": [512]}, "max_units_per_submission": 8192,
            "assigned_validators": 3, "class_history": 0, "class_lease_share": 0.25, "length_scope": "all",
            "problem_order": "random", "toploc_profile": "fp32"}).to_bytes(),
    }
    doc = json.loads(out["minimal"])
    doc.pop("length_scope", None)
    out["stored_old"] = json.dumps(doc, sort_keys=True).encode()
    out["other_schema"] = out["minimal"].replace(b"poolrules/v1", b"poolrules/v9")
    out["not_object"] = b'["intellect.poolrules/v1"]'
    return out


# ------------------------------------------------------------------------------------- difficulty table

DIFFICULTY_ERRORS = (DifficultyError,)
_DIFFICULTY_TASKS = TaskSet([Task(id=f"t{i}", prompt=f"p{i}", verifier="math", answer=str(i)) for i in range(12)],
                            name="fuzz-difficulty")


def difficulty_target(data: bytes) -> None:
    """A checkpoint's `difficulty.json` as workers and validators read it (issue 37): refused with a message, or
    a table that round-trips, whose weights are positive and whose adaptive draw takes distinct problems."""
    table = _refused(lambda: DifficultyTable.from_bytes(data, name="fuzz"), DIFFICULTY_ERRORS)
    if table is None:
        return
    if DifficultyTable.from_bytes(table.to_bytes()) != table:
        raise Finding("an accepted difficulty table does not round-trip through to_bytes")
    ids = [t.id for t in _DIFFICULTY_TASKS] + list(table.counts)[:4]
    if min(weights(table, ids)) <= 0:
        raise Finding("a problem weighs nothing: it could never be drawn")
    got = adaptive_problems(_DIFFICULTY_TASKS, table, hashlib.sha256(data).digest(), 5, [8, 16])
    if len({a.index for a in got}) != 5:
        raise Finding("the adaptive draw repeated a problem")


def difficulty_seeds() -> dict[str, bytes]:
    table = DifficultyTable(group_size=4, counts={"t0": (8, 4), "t1": (16, 0), "t2": (4, 4), "other": (2**48, 1)})
    doc = json.loads(table.to_bytes())
    return {
        "empty": DifficultyTable.empty(8).to_bytes(),
        "learnt": table.to_bytes(),
        "other_schema": table.to_bytes().replace(b"difficulty/v1", b"difficulty/v2"),
        "solved_over_tried": json.dumps({**doc, "counts": {"t0": [1, 2]}}).encode(),
        "not_object": b'["intellect.difficulty/v1"]',
    }


# ------------------------------------------------------------------------------------- network descriptor

NETWORK_ERRORS = (NetworkDescriptorError, SchemaVersionError)


def network_target(data: bytes) -> None:
    """A network descriptor as a joiner fetches it (`parse_network`: size, JSON, schema, shape, signature, signer
    = deployer): accepted ones round-trip through `to_bytes` and still verify."""
    desc = _refused(lambda: parse_network(data, "fuzz"), NETWORK_ERRORS)
    if desc is None:
        return
    if parse_network(desc.to_bytes(), "fuzz round trip") != desc:
        raise Finding("an accepted network descriptor does not round-trip through to_bytes")


def network_seeds() -> dict[str, bytes]:
    from eth_account import Account

    from intellect.sdk import Deployment

    account = Account.from_key(TEST_KEY)
    dep = Deployment.model_validate({
        "schema": "intellect.deployment/v1", "chainId": CHAIN_ID, "network": "development", "blockNumber": 1,
        "deployer": account.address, "defaultPoolId": 1,
        "contracts": {name: {"address": "0x" + f"{i + 1:040x}", "blockNumber": 1 + i} for i, name in enumerate(
            ("IntellectToken", "NodeRegistry", "StakeManager", "TaskLedger", "AttesterBook"))}})
    signed = sign_network(dep, name="fuzz-net", rpc_urls=["http://10.0.0.1:8545", "https://rpc.example"],
                          account=account, issued_at=1_795_000_000).to_bytes()
    doc = json.loads(signed)
    doc["rpcUrls"] = ["http://attacker.example:8545"]
    return {
        "signed": signed,
        "altered": json.dumps(doc).encode(),
        "other_schema": signed.replace(b"intellect.network/v1", b"intellect.network/v9"),
        "not_object": b'["intellect.network/v1"]',
    }


# ---------------------------------------------------------------------------------------------- task sets

TASKSET_ERRORS = (TaskSetError,)


def taskset_target(data: bytes) -> None:
    ts = _refused(lambda: TaskSet.from_bytes(data, name="fuzz"), TASKSET_ERRORS)
    if ts is None:
        return
    again = TaskSet.from_bytes(ts.to_jsonl_bytes(), name="fuzz round trip")
    if [t.model_dump() for t in again] != [t.model_dump() for t in ts] or again.digest() != ts.digest():
        raise Finding("an accepted task set does not round-trip through to_jsonl_bytes")
    seed = hashlib.sha256(data).digest()
    n = min(len(ts), 2)
    for order in ("random", "epochs"):  # what a worker and a validator do with a claim's seed
        got = assign_problems(ts, order, seed=seed, task_id=7, n=n, target_lengths=[64, 128])
        if len(got) != n:
            raise Finding(f"assign_problems({order}) gave {len(got)} problems, asked {n}")


def taskset_seeds() -> dict[str, bytes]:
    math = Task(id="m1", prompt="What is 2+3?", verifier="math", answer="5", source="synthetic")
    code = Task(id="c1", prompt="def add(a, b):\n", verifier="code", tests=["assert add(1, 2) == 3"],
                entry_point="add", difficulty=0.5)
    return {
        "math_and_code": TaskSet([math, code], name="mixed").to_jsonl_bytes(),
        "three_math": TaskSet([math, *(Task(id=f"m{i}", prompt=f"{i}*{i}?", verifier="math", answer=str(i * i))
                                      for i in range(2, 4))], name="sq").to_jsonl_bytes(),
        "header_only": b'{"name": "x", "schema": "intellect.taskset/v1"}\n',
        "duplicate_ids": TaskSet([math], name="d").to_jsonl_bytes() + json.dumps(math.model_dump(
            mode="json", exclude_none=True)).encode() + b"\n",
        "crlf_blank_lines": TaskSet([math], name="crlf").to_jsonl_bytes().replace(b"\n", b"\r\n\r\n"),
    }


# ------------------------------------------------------------------------------------------- attestations

ATTESTATION_ERRORS = (ValidationError, AttestationError)


def _json_body(raw: bytes) -> Any:
    """What an agent server hands a POST route: `parse_json_body` (HttpError 400 on anything not JSON)."""
    return parse_json_body(raw)


def attestation_target(data: bytes) -> None:
    """`POST /attestations` at the trainer (the body parsed by the agent server, then validated and its
    signature checked: `Trainer.accept_attestation`'s first step), and `Attestation.from_json`."""
    try:
        body = _json_body(data)
    except HttpError as exc:
        if exc.status != 400:
            raise Finding(f"agent server answered {exc.status} for a body: {exc.message}") from exc
        body = None
    else:
        def check() -> Attestation:
            att = Attestation.model_validate(body)
            att.verify()
            return att

        _refused(check, ATTESTATION_ERRORS)
    att = _refused(lambda: Attestation.from_json(data, source="fuzz"), (AttestationError,))
    if att is not None and Attestation.from_json(att.model_dump_json(by_alias=True)) != att:
        raise Finding("an accepted attestation does not round-trip through JSON")


def attestation_seeds() -> dict[str, bytes]:
    good = sign_attestation(TEST_KEY, chain_id=CHAIN_ID, ledger=LEDGER, submission_id=3,
                            rollouts_cid="bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am",
                            proofs_hash="0x" + "ab" * 32, policy_step=1)
    rejected = sign_attestation(TEST_KEY, chain_id=CHAIN_ID, ledger=LEDGER, submission_id=2**64,
                                rollouts_cid="Qm" + "x" * 44, proofs_hash="cd" * 32, policy_step=0, accepted=False)
    raw = good.model_dump_json(by_alias=True).encode()
    return {
        "accepted": raw,
        "rejected": rejected.model_dump_json(by_alias=True).encode(),
        "wrong_signer": raw.replace(b'"submission_id":3', b'"submission_id":4'),
        "big_chain": raw.replace(b'"chain_id":31337', b'"chain_id":' + b"9" * 80),
        "not_object": b"[1, 2, 3]",
    }


# ------------------------------------------------------------------------------------------------- CIDs

CID_ERRORS = (IpfsError,)  # InvalidCidError


def cid_target(data: bytes) -> None:
    """CID text (a URL path segment, a JSON field, an on-chain string) and binary CIDs (in dag-pb links)."""
    text = data.decode("utf-8", errors="surrogateescape")
    for parse, arg in ((Cid.parse, text), (Cid.from_bytes, data)):
        cid = _refused(lambda parse=parse, arg=arg: parse(arg), CID_ERRORS)
        if cid is None:
            continue
        if Cid.parse(str(cid)) != cid or Cid.from_bytes(cid.to_bytes()) != cid:
            raise Finding(f"accepted CID {cid} does not round-trip")
        if cid.to_v1() != Cid.parse(str(cid.to_v1())):
            raise Finding(f"CID {cid} does not round-trip as v1")


def cid_seeds() -> dict[str, bytes]:
    raw = Cid.of(b"hello\n", RAW)
    pb = Cid.of(b"node", DAG_PB)
    v0 = Cid(0, DAG_PB, pb.digest)
    return {
        "v1_raw_text": str(raw).encode(),
        "v1_dag_pb_text": str(pb).encode(),
        "v0_text": str(v0).encode(),
        "v1_upper": str(raw).upper().encode(),
        "v1_raw_binary": raw.to_bytes(),
        "v0_binary": v0.to_bytes(),
        "base58_z": b"z" + str(v0).encode(),
    }


# -------------------------------------------------------------------------------------- UnixFS / dag-pb

UNIXFS_ERRORS = (IpfsError,)  # CidMismatchError, ContentTooLargeError, InvalidCidError
_LEAVES = [b"", b"hello\n", bytes(range(256)) * 4]
_BLOCKS: dict[bytes, bytes] = {}


def _known_blocks() -> dict[bytes, bytes]:
    """Blocks a fuzzed root may link to (by digest): raw leaves and dag-pb nodes over them, one of which
    links one node many times over (the shape of a DAG bomb)."""
    if not _BLOCKS:
        links = []
        for leaf in _LEAVES:
            cid = Cid.of(leaf, RAW)
            _BLOCKS[cid.digest] = leaf
            links.append(Link(cid, len(leaf), len(leaf)))
        inner = encode_node(links)
        inner_cid = Cid.of(inner, DAG_PB)
        _BLOCKS[inner_cid.digest] = inner
        inner_link = Link(inner_cid, len(inner) + sum(x.tsize for x in links), sum(x.filesize for x in links))
        fan = encode_node([inner_link] * 174)
        _BLOCKS[Cid.of(fan, DAG_PB).digest] = fan
    return _BLOCKS


def unixfs_target(data: bytes) -> None:
    """A dag-pb block as a peer or gateway serves it: `decode_node`, then `read_dag` with the block as the
    root of a DAG whose other blocks are the known ones (a fetch that verifies every block's CID)."""
    node = _refused(lambda: decode_node(data), UNIXFS_ERRORS)
    if node is not None and node.blocksizes and len(node.blocksizes) != len(node.links):
        raise Finding("decode_node accepted blocksizes that do not match the links")
    root = Cid.of(data, DAG_PB)
    known = _known_blocks()

    def get_block(cid: Cid) -> bytes:
        if cid.digest == root.digest:
            return data
        block = known.get(cid.digest)
        if block is None:
            raise IpfsError(f"block {cid} not found")
        return block

    def read() -> int:
        return sum(len(chunk) for chunk in read_dag(root, get_block, max_size=64 * 1024, source="fuzz"))

    total = _refused(read, UNIXFS_ERRORS)
    if total is not None and total > 64 * 1024:
        raise Finding(f"read_dag yielded {total} bytes past its max_size")


def unixfs_seeds() -> dict[str, bytes]:
    known = _known_blocks()
    leaves = [Cid.of(leaf, RAW) for leaf in _LEAVES]
    inner = next(d for d, b in known.items() if b.startswith(b"\x12") and len(b) < 400)
    fan = next(d for d, b in known.items() if len(b) > 2000)
    inner_cid, fan_cid = Cid(1, DAG_PB, inner), Cid(1, DAG_PB, fan)
    return {
        "two_leaves": encode_node([Link(c, 10, len(x)) for c, x in zip(leaves[1:], _LEAVES[1:], strict=True)]),
        "one_empty_leaf": encode_node([Link(leaves[0], 0, 0)]),
        "inner_node": known[inner],
        "links_to_node": encode_node([Link(inner_cid, 2000, 1030), Link(leaves[1], 6, 6)]),
        "bomb": encode_node([Link(fan_cid, 10**6, 174 * 1030)] * 8),
        "no_links": encode_node([]),
        "packed_blocksizes": bytes.fromhex("0a0a08021806220401020304"),
    }


# ------------------------------------------------------------------------------------------ POST /store

STORE_ERRORS = (HttpError,)


_WORKER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"  # TEST_KEY's address
_TASK_ID = 7


class _MemoryState:
    """The trainer's state store as `/store` uses it (record, records, put), in memory, emptied per input."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, Any]] = {}

    def record(self, kind: str, id: str | int) -> dict[str, Any] | None:
        return self.rows.get((kind, str(id)))

    def records(self, kind: str, status: str | None = None) -> list[dict[str, Any]]:
        return [r for (k, _), r in self.rows.items() if k == kind and (status is None or r["status"] == status)]

    def put(self, kind: str, id: str | int, status: str, data: dict[str, Any] | None = None) -> None:
        old = self.rows.get((kind, str(id)), {}).get("data", {})
        self.rows[(kind, str(id))] = {"id": str(id), "status": status, "data": {**old, **(data or {})}}


class _StoreProtocol:
    """The chain as `accept_pushed_file` asks it: every signer is an eligible worker, and ledger task 7 of pool 1
    is leased to TEST_KEY's address until far in the future (so that the fuzzer reaches the file's checks)."""

    chain_id = CHAIN_ID
    contracts: ClassVar[dict[str, Any]] = {"TaskLedger": type("Ledger", (), {"address": LEDGER})}

    def node_core(self, _address: str) -> tuple[str, Any, Any]:
        from intellect.sdk import NodeStatus, Role

        return _WORKER, Role.WORKER, NodeStatus.ACTIVE

    def active_stake(self, _address: str) -> int:
        return 10**21

    def min_stake(self, _role: Any) -> int:
        return 10**18

    def task(self, task_id: int) -> Any:
        import types

        from intellect.sdk import TaskStatus

        status = TaskStatus.CLAIMED if task_id == _TASK_ID else TaskStatus.NONE
        return types.SimpleNamespace(status=status, pool_id=1, node=_WORKER, lease_expiry=2**40, window_end=2**40)

    def chain_time(self) -> int:
        return 1_800_000_000

    def get_events(self, *_a: Any, **_k: Any) -> list[Any]:
        return []


class _MemoryIpfs:
    """A store that keeps nothing (the fuzzer must not fill a disk): answers the CID `ipfs add` gives."""

    def add(self, data: bytes, *, pin: bool = True) -> str:
        from intellect.sdk.ipfs import compute_cid

        return compute_cid(data)


class _StoreAgent:
    def __init__(self) -> None:
        import types

        self.protocol = _StoreProtocol()
        self.ipfs = _MemoryIpfs()
        self.state = _MemoryState()
        self.pool_id = 1
        self.rules = types.SimpleNamespace(problems_per_task=2, group_size=3, max_budget=64)
        self.task_set = None
        self.cfg = types.SimpleNamespace(trainer=types.SimpleNamespace(store=types.SimpleNamespace(
            pushes_per_minute=10**9, max_files=64, max_bytes=64 << 20)))
        self.counts: dict[str, int] = {}

    def count(self, name: str, amount: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + amount


_AGENT = _StoreAgent()


def _store(body: Any) -> Any:
    _AGENT.state = _MemoryState()  # each input on its own: no quota carried from the last one
    return accept_pushed_file(_AGENT, body)


def store_target(data: bytes) -> None:
    """The trainer's `POST /store` (`intellect.store/v2`): the agent server's body parse, then
    `accept_pushed_file` (schema, base64, signature, eligibility, lease, CID, size bound, quota, the rollout
    file's parse and its claim). The chain, state store and IPFS store are the stand-ins above."""
    try:
        body = _json_body(data)
    except HttpError as exc:
        if exc.status != 400:
            raise Finding(f"agent server answered {exc.status} for a body: {exc.message}") from exc
        return
    try:
        _store(body)
    except HttpError as exc:
        if not 400 <= exc.status < 500:
            raise Finding(f"/store answered {exc.status} for a client's body: {exc.message}") from exc


def _rollout_file(task_id: int = _TASK_ID, tokens: int = 12) -> bytes:
    rows = [RolloutRow(problem_id=f"p{g}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                       reward=0.5, task_reward=1.0, length_penalty=0.5, target_length=32, advantage=0.1 * k,
                       policy_step=1, worker=_WORKER, proofs=[])
            for g in range(2) for k in range(3)]
    meta = RolloutMeta(task_id=str(task_id), seed="0xbeef", model="step-1", worker=_WORKER, policy_step=1,
                       group_size=3)
    return RolloutFile(meta, rows, name="seed").to_bytes()


def store_seeds() -> dict[str, bytes]:
    from intellect.sdk.ipfs import compute_cid

    def body(blob: bytes, task_id: int = _TASK_ID) -> dict[str, Any]:
        return store_request(TEST_KEY, CHAIN_ID, LEDGER, task_id, compute_cid(blob), blob)

    good = _rollout_file()
    out = {
        "rollout_file": json.dumps(body(good)).encode(),
        "not_rollouts": json.dumps(body(b"rollouts\n" * 8)).encode(),
        "other_task": json.dumps(body(_rollout_file(task_id=8), task_id=8)).encode(),
        "too_long": json.dumps(body(_rollout_file(tokens=80))).encode(),
    }
    b = body(good)
    out["wrong_cid"] = json.dumps({**b, "cid": compute_cid(b"other")}).encode()
    out["bad_base64"] = json.dumps({**b, "data": "!!" + b["data"]}).encode()
    out["old_schema"] = json.dumps({**b, "schema": "intellect.store/v1"}).encode()
    return out


# ------------------------------------------------------------------------------------------ TOPLOC proofs

TOPLOC_ERRORS = (ProofFormatError,)


def toploc_target(data: bytes) -> None:
    """One proof of a rollout file's `proofs` column (`decode_proof`)."""
    got = _refused(lambda: decode_proof(data), TOPLOC_ERRORS)
    if got is not None and encode_proof(*got) != bytes(data):
        raise Finding("an accepted proof does not re-encode to its bytes")


def toploc_seeds() -> dict[str, bytes]:
    import numpy as np

    from intellect.verifier.toploc import PRIME, TOPK

    rnd = np.random.default_rng(32)
    return {
        "random": encode_proof(12345, rnd.integers(0, PRIME, TOPK)),
        "zeros": encode_proof(1, np.zeros(TOPK, dtype=np.int64)),
        "max": encode_proof(PRIME, np.full(TOPK, PRIME - 1)),
        "short": encode_proof(7, np.arange(5)),
    }


# ---------------------------------------------------------------------------------------- peers' /status

STATUS_ERRORS = (PeerDocumentError,)


def status_target(data: bytes) -> None:
    """A peer's `/status` document (`parse_status`, then the service URLs an agent takes from it)."""
    doc = _refused(lambda: parse_status(data, "fuzz"), STATUS_ERRORS)
    if doc is None:
        return
    for name in ("ipfs_gateway", "shardcast", "attestations", "store"):
        url = peer_service(doc, name)
        if url is not None and not url.startswith(("http://", "https://")):
            raise Finding(f"peer_service gave a non-http URL {url!r}")


def status_seeds() -> dict[str, bytes]:
    from intellect.agents.roles._server import bounded_status

    doc = {"schema": "intellect.agent.status/v1", "role": "validator", "address": LEDGER,
           "services": {"ipfs_gateway": "http://127.0.0.1:8080", "shardcast": "https://relay.example:443"},
           "counters": {"attestations_signed": 3}, "recent": [{"sid": i} for i in range(5)]}
    return {
        "validator": json.dumps(bounded_status(doc, 3)).encode(),
        "no_services": b'{"role":"worker"}',
        "services_not_object": b'{"services":["http://x"]}',
        "service_not_http": b'{"services":{"ipfs_gateway":"file:///etc/passwd"}}',
    }


# ------------------------------------------------------------------------------- completions (rewards)


def completion_target(data: bytes) -> None:
    """A completion's text (decoded tokens of a rollout file) through the validator's in-process reward
    steps: answer extraction and normalisation, the plain-number comparison, code extraction. (The sympy
    comparison and the code run in a child process/sandbox: not here.) These must never raise nor stall."""
    text = data.decode("utf-8", errors="replace")
    answer = _rewards.extract_answer(text)
    # `compare_answers` up to the math judge: only answers of at most MAX_ANSWER_CHARS are normalised
    if answer is not None and len(answer) <= _rewards.MAX_ANSWER_CHARS:
        norm = _rewards._normalize(answer)
        _rewards._numbers_equal(norm, _rewards._normalize("5"))
        _rewards._numbers_equal(norm, norm)
    _rewards.extract_code(text)


def completion_seeds() -> dict[str, bytes]:
    return {
        "boxed": b"<think>2+3 is 5</think> The answer is \\boxed{5}.",
        "frac": b"so x = \\boxed{\\frac{1}{2}}",
        "nested_boxed": b"\\boxed{\\text{\\textbf{12}}} and \\fbox{3}",
        "last_number": b"first 1,000 then 2.5 then -3/4",
        "sqrt": b"\\boxed{2\\sqrt{3} + \\sqrt[3]{8}}",
        "code": b"<think>hmm</think>\n```python\ndef add(a, b):\n    return a + b\n```\n",
        "unclosed": b"\\boxed{\\boxed{\\boxed{1",
    }


# ------------------------------------------------------------------- a validator's GET /attestations page


class _PageResponse:
    ok = True
    status = 200

    def __init__(self, body: bytes) -> None:
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)


def attestation_page_target(data: bytes) -> None:
    """A page of a validator's `GET /attestations` as the trainer pulls it (`attestation_intake.pull_attestations`,
    the real function): the page's JSON, each item's cursor fields, then each item's validation and signature
    check (the first step of `AttestationIntake.accept`; the chain's part is not run). The validator directory,
    the state store and the HTTP fetch are stand-ins; the function must neither raise nor stop advancing its
    cursor."""
    import types

    fetch_module = attestation_intake  # the module whose `fetch` the trainer's pull calls

    def accept(item: Any) -> None:
        try:
            Attestation.model_validate(item).verify()
        except (ValidationError, AttestationError) as exc:
            raise HttpError(400, f"invalid attestation: {exc}") from None

    node = types.SimpleNamespace(endpoint="http://validator", address="0x" + "11" * 20)
    state: dict[str, Any] = {}
    directory = types.SimpleNamespace(by_role=lambda _role: [node], benched=lambda _a: False,
                                      penalise=lambda _a, _e="": 0.0)
    store = types.SimpleNamespace(get=lambda k, d=None: state.get(k, d), set=state.__setitem__)
    real = fetch_module.fetch
    fetch_module.fetch = lambda *_a, **_k: _PageResponse(data)  # type: ignore[assignment]
    try:
        attestation_intake.pull_attestations(directory, store, accept, max_pages=1)  # type: ignore[arg-type]
    finally:
        fetch_module.fetch = real


def attestation_page_seeds() -> dict[str, bytes]:
    att = json.loads(attestation_seeds()["accepted"])
    return {
        "one": json.dumps([{**att, "_updated_at": 1764201600.25, "_id": 3}]).encode(),
        "two_and_junk": json.dumps([{**att, "_updated_at": 1.5, "_id": 1}, {"_updated_at": "x"}, 7,
                                    {**att, "submission_id": 9, "_updated_at": 2.0}]).encode(),
        "empty": b"[]",
        "not_list": b'{"items": []}',
        "cursor_overflow": b'[{"_updated_at": 1' + b"0" * 400 + b', "_id": 1}]',
    }


# ------------------------------------------------------------------------ the dashboard's view of /status


def dashboard_target(data: bytes) -> None:
    """A node's `/status` answer as the dashboard reads it (`StatusFetcher.fetch_one`, the real method, with the
    HTTP fetch a stand-in that returns `data`), then the trainer's steps and the reward curve built from it
    (`trainer_steps`, `reward_curve`): a bad document is reported for its node, never fatal to the page."""
    from intellect.sdk.dashboard import StatusFetcher, reward_curve, trainer_steps

    doc, err = StatusFetcher(get=lambda *_a, **_k: _PageResponse(data)).fetch_one("http://node")
    if (doc is None) == (err is None):
        raise Finding(f"fetch_one gave both or neither of a document and an error: {doc!r}, {err!r}")
    if doc is not None:
        reward_curve(trainer_steps(doc), [], [])


def dashboard_seeds() -> dict[str, bytes]:
    doc = {"schema": "intellect.agent.status/v1", "role": "trainer", "steps": [
        {"step": 1, "mean_reward": 0.25, "rollouts_used": 48, "eval_pass_at_1": 0.5},
        {"step": 2, "mean_reward": None, "rollouts": 16.0}]}
    return {
        "trainer": json.dumps(doc).encode(),
        "steps_as_dict": json.dumps({"trainer": {"steps": {"3": {"mean_reward": 1}}}}).encode(),
        "other_schema": b'{"schema": "intellect.agent.status/v9"}',
        "huge_numbers": b'{"steps": [{"step": 1e999, "mean_reward": 1' + b"0" * 400 + b', "rollouts": 1e999}]}',
    }


# ------------------------------------------------------------------------------------ agent HTTP server


_ERRORS: list[Any] = []


def _quiet(*names: str) -> None:
    """Keep the servers' error records (a finding when a request caused one) instead of printing them."""
    import logging

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            _ERRORS.append(record)

    for name in names:
        log = logging.getLogger(name)
        log.handlers[:] = [_Keep(logging.ERROR)]
        log.propagate = False


class _Conn:
    """A connection whose bytes are `data` (what a client sent) and whose replies are kept."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.sent = bytearray()

    def makefile(self, mode: str, *_args: Any, **_kw: Any) -> Any:
        import io

        return io.BytesIO(self.data) if "r" in mode else io.BytesIO()

    def sendall(self, b: bytes) -> None:
        self.sent += b

    def settimeout(self, _t: float | None) -> None:
        pass

    def setsockopt(self, *_a: Any) -> None:
        pass

    def sendfile(self, f: Any, offset: int = 0, count: int | None = None) -> int:
        f.seek(offset)
        data = f.read(count) if count is not None else f.read()
        self.sent += data
        return len(data)


_SERVER: list[Any] = []


def _agent_server() -> Any:
    """One real `AgentServer` (bound, never started: requests are handed to its handler in memory) with the
    trainer's POST routes."""
    if not _SERVER:
        from intellect.agents.roles._server import AgentServer, Metrics

        _quiet("intellect.agents.roles._server", "intellect.sdk._http")
        metrics = Metrics()
        metrics.declare("files_stored", "counter", "files stored")
        server = AgentServer(lambda: {"role": "trainer", "recent": list(range(300))}, metrics)

        def attestation_route(_q: Any, body: Any) -> Any:
            try:
                att = Attestation.model_validate(body)
                att.verify()
            except (ValidationError, AttestationError) as exc:
                raise HttpError(400, f"invalid attestation: {exc}") from None
            return {"ok": True}

        server.route("POST", "/attestations", attestation_route)
        server.route("POST", "/store", lambda _q, body: _store(body))
        _SERVER.append(server)
    return _SERVER[0]


def agent_http_target(data: bytes) -> None:
    """Raw bytes on a connection to an agent's HTTP server (request line, headers, Content-Length, body,
    `/status?limit=`, the trainer's POST routes): every request is answered, never with a 500."""
    _no_500("the agent server", _serve(_agent_server(), data))  # the handler serves in its constructor


def agent_http_seeds() -> dict[str, bytes]:
    def post(path: str, body: bytes, extra: bytes = b"") -> bytes:
        return (f"POST {path} HTTP/1.1\r\nHost: trainer\r\nContent-Type: application/json\r\n".encode()
                + extra + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)

    return {
        "status": b"GET /status?limit=5 HTTP/1.1\r\nHost: t\r\n\r\n",
        "status_bad_limit": b"GET /status?limit=x HTTP/1.1\r\nHost: t\r\n\r\n",
        "metrics": b"GET /metrics HTTP/1.0\r\n\r\n",
        "attestation": post("/attestations", attestation_seeds()["accepted"]),
        "store": post("/store", store_seeds()["rollout_file"]),
        "keepalive_two": post("/attestations", b"{}") + b"GET /status HTTP/1.1\r\nHost: t\r\n\r\n",
        "no_route": post("/nope", b"[]"),
    }


# ----------------------------------------------------------------------- IPFS gateway, Shardcast server

_SERVED: dict[str, Any] = {}


def _served() -> dict[str, Any]:
    """A real `IpfsGateway` over an `EmbeddedIpfs` store and a real Shardcast `ShardServer` over a `ShardStore`
    with one published version (both bound, never started; in a temporary folder kept for the process)."""
    if not _SERVED:
        import atexit
        import shutil
        import tempfile
        from datetime import UTC, datetime
        from pathlib import Path

        from intellect.sdk.ipfs import EmbeddedIpfs, IpfsGateway
        from intellect.sdk.shardcast import ShardServer, ShardStore, build_shards

        _quiet("intellect.sdk.ipfs._gateway", "intellect.sdk.shardcast._server", "intellect.sdk._http")
        tmp = Path(tempfile.mkdtemp(prefix="intellect-fuzz-"))
        atexit.register(shutil.rmtree, tmp, True)
        ipfs = EmbeddedIpfs(tmp / "ipfs")
        _SERVED["cids"] = [ipfs.add(b"hello\n"), ipfs.add(bytes(range(256)) * 1100)]  # a leaf and a 2-leaf DAG
        _SERVED["gateway"] = IpfsGateway(ipfs)
        ckpt = tmp / "ckpt"
        ckpt.mkdir()
        (ckpt / "w.bin").write_bytes(bytes(range(256)) * 12)
        store = ShardStore(tmp / "shards")
        manifest = build_shards(ckpt, tmp / "shards" / "out", step=1, model_name="tiny", shard_size=1024)
        manifest = manifest.model_copy(update={"created_at": datetime(2026, 11, 27, tzinfo=UTC)})  # a fixed id
        state = store.add_version(manifest, present={s.index for s in manifest.shards})
        for shard in manifest.shards:  # the shard files, where the store serves them from
            state.shard_path(shard.index).write_bytes((tmp / "shards" / "out" / str(shard.index)).read_bytes())
        _SERVED["vid"] = manifest.id
        # a long poll is a wait, not a hang: not here (`?wait=` answers at once)
        _SERVED["shardcast"] = ShardServer(store, role="origin", max_wait=0.0)
    return _SERVED


def _serve(server: Any, data: bytes) -> bytes:
    """`data` as one connection's bytes: the server's head parser (what its I/O thread runs on every complete
    head, `sdk/_http.py: _parse_head`), then its handler class on the same bytes whatever the parser said (a
    head the I/O thread refuses never reaches a handler; the handler must still not fail on it)."""
    from intellect.sdk.http import parse_head as _parse_head

    conn = _Conn(data)
    _ERRORS.clear()
    ends = [k + n for k, n in ((data.find(b"\n\r\n"), 3), (data.find(b"\n\n"), 2)) if k >= 0]
    if ends:
        parsed = _parse_head(data[:min(ends)])
        if not isinstance(parsed, str | tuple):
            raise Finding(f"the head parser returned {parsed!r}")
    serve_one(server, conn)
    return bytes(conn.sent)


def serve_one(server: Any, conn: Any) -> None:
    """Run `server`'s handler class on `conn` as its worker threads do (the handler answers in its constructor)."""
    server.handler(conn, ("127.0.0.1", 1), server._core)


def _no_500(what: str, out: bytes) -> None:
    """A server's answer must not be a 500, nor may the server have logged an error: its handlers catch
    everything (so that a bad request cannot take a server thread down) and log what was unexpected."""
    for line in out.split(b"\r\n"):
        if line.startswith(b"HTTP/") and b" 500 " in line + b" ":
            raise Finding(f"{what} answered 500: {out[-300:]!r}")
    if _ERRORS:
        record = _ERRORS[0]
        raise Finding(f"{what} logged an error: {record.getMessage()} {record.exc_info[1] if record.exc_info else ''!r}")


def gateway_target(data: bytes) -> None:
    """Raw bytes on a connection to the IPFS gateway (`GET|HEAD /ipfs/<cid>`, `?format=raw`, Accept)."""
    _no_500("the IPFS gateway", _serve(_served()["gateway"], data))


def gateway_seeds() -> dict[str, bytes]:
    leaf, dag = _served()["cids"]
    return {
        "leaf": f"GET /ipfs/{leaf} HTTP/1.1\r\nHost: g\r\n\r\n".encode(),
        "dag_head": f"HEAD /ipfs/{dag} HTTP/1.1\r\nHost: g\r\n\r\n".encode(),
        "raw_block": f"GET /ipfs/{dag}?format=raw HTTP/1.1\r\nAccept: application/vnd.ipld.raw\r\n\r\n".encode(),
        "missing": b"GET /ipfs/bafkreiaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa HTTP/1.1\r\n\r\n",
        "not_ipfs": b"GET /ipns/x HTTP/1.0\r\n\r\n",
    }


def shardcast_http_target(data: bytes) -> None:
    """Raw bytes on a connection to a Shardcast origin or relay (`/health`, `/versions`, a manifest, a shard
    with or without Range)."""
    _no_500("the Shardcast server", _serve(_served()["shardcast"], data))


def shardcast_http_seeds() -> dict[str, bytes]:
    vid = _served()["vid"]
    base = "/shardcast/v1"
    return {
        "health": f"GET {base}/health HTTP/1.1\r\nHost: s\r\n\r\n".encode(),
        "versions": f"GET {base}/versions?wait=0&after={vid} HTTP/1.1\r\n\r\n".encode(),
        "manifest": f"GET {base}/versions/{vid}/manifest HTTP/1.1\r\n\r\n".encode(),
        "shard_range": f"GET {base}/versions/{vid}/shards/1 HTTP/1.1\r\nRange: bytes=10-99\r\n\r\n".encode(),
        "shard_suffix": f"HEAD {base}/versions/{vid}/shards/2 HTTP/1.1\r\nRange: bytes=-5\r\n\r\n".encode(),
        "shard_missing": f"GET {base}/versions/{vid}/shards/99 HTTP/1.1\r\n\r\n".encode(),
    }


# ------------------------------------------------------------------------------- attestation root file

ATTESTATION_ROOT_ERRORS = (AttestationRootError,)


def attestation_root_target(data: bytes) -> None:
    """A step's attestation-root leaves file as a validator reads it from IPFS (issue 38): refused with a message,
    or a file whose leaves rebuild its root, that round-trips, and whose multiproofs are of that tree."""
    f = _refused(lambda: AttestationRootFile.parse(data), ATTESTATION_ROOT_ERRORS)
    if f is None:
        return
    if AttestationRootFile.parse(f.to_bytes(), expect_root=f.root) != f:
        raise Finding("an accepted attestation root file does not round-trip through to_bytes")
    tree = f.tree()
    picked = sorted({0, len(f.leaves) - 1})
    proof, flags = tree.multiproof(picked)
    if len(picked) + len(proof) != len(flags) + 1:
        raise Finding("a multiproof's flags do not match its proof and leaves (OpenZeppelin's invariant)")


def attestation_root_seeds() -> dict[str, bytes]:
    book, v1, v2 = "0x" + "11" * 20, "0x" + "22" * 20, "0x" + "33" * 20
    f = AttestationRootFile.build(chain_id=1337, book=book, pool_id=1, step=3,
                                  entries=[(7, v1, 2), (8, v1, 2), (7, v2, 4)])
    doc = json.loads(f.to_bytes())
    swapped = {**doc, "leaves": [doc["leaves"][1], doc["leaves"][0], doc["leaves"][2]]}
    return {
        "three_leaves": f.to_bytes(),
        "one_leaf": AttestationRootFile.build(chain_id=1, book=book, pool_id=0, step=0, entries=[(1, v1, 1)]).to_bytes(),
        "other_schema": f.to_bytes().replace(b"attestation-root/v1", b"attestation-root/v2"),
        "other_root": json.dumps({**doc, "root": "0x" + "00" * 32}).encode(),
        "leaves_swapped": json.dumps(swapped).encode(),
        "not_object": b'["intellect.attestation-root/v1"]',
    }


# -------------------------------------------------------------------------------------------------- all

READERS: dict[str, Reader] = {r.name: r for r in [
    Reader("rollouts", "rollout file, v2 (`RolloutFile.from_bytes`; v1 Parquet runs in a child)", rollouts_target,
           ROLLOUT_ERRORS, rollouts_seeds),
    Reader("manifest", "Shardcast manifest (`Manifest.from_bytes`)", manifest_target, MANIFEST_ERRORS,
           manifest_seeds),
    Reader("poolrules", "pool-rules document (`PoolRules.from_bytes`)", poolrules_target, POOLRULES_ERRORS,
           poolrules_seeds),
    Reader("difficulty", "a checkpoint's difficulty table (`DifficultyTable.from_bytes`, weights, adaptive draw)",
           difficulty_target, DIFFICULTY_ERRORS, difficulty_seeds),
    Reader("attestation_root", "a step's attestation-root leaves file (`AttestationRootFile.parse`, multiproof)",
           attestation_root_target, ATTESTATION_ROOT_ERRORS, attestation_root_seeds),
    Reader("network", "signed network descriptor (`parse_network`)", network_target, NETWORK_ERRORS,
           network_seeds),
    Reader("taskset", "task set, JSONL (`TaskSet.from_bytes`)", taskset_target, TASKSET_ERRORS, taskset_seeds),
    Reader("attestation", "trainer's POST /attestations body (`Attestation`, `verify`)", attestation_target,
           ATTESTATION_ERRORS, attestation_seeds),
    Reader("attestation_page", "a validator's GET /attestations page (`attestation_intake.pull_attestations`)",
           attestation_page_target, (HttpError,), attestation_page_seeds),
    Reader("dashboard", "a node's /status as the dashboard reads it (`StatusFetcher.fetch_one`, steps, curve)",
           dashboard_target, (), dashboard_seeds, prepare=lambda: __import__("intellect.sdk.dashboard")),
    Reader("cid", "CID text and binary (`Cid.parse`, `Cid.from_bytes`)", cid_target, CID_ERRORS, cid_seeds),
    Reader("unixfs", "dag-pb/UnixFS block (`decode_node`, `read_dag`)", unixfs_target, UNIXFS_ERRORS,
           unixfs_seeds),
    Reader("store", "trainer's POST /store body (`accept_pushed_file`)", store_target, STORE_ERRORS, store_seeds),
    Reader("toploc", "TOPLOC proof (`decode_proof`)", toploc_target, TOPLOC_ERRORS, toploc_seeds),
    Reader("status", "peer's /status document (`parse_status`, `peer_service`)", status_target, STATUS_ERRORS,
           status_seeds),
    Reader("completion", "completion text in the validator's reward steps (`extract_answer`, ...)",
           completion_target, (), completion_seeds),
    Reader("agent_http", "raw HTTP request to an agent server (`/status`, POST routes)", agent_http_target,
           (), agent_http_seeds),
    Reader("gateway", "raw HTTP request to the IPFS gateway (`/ipfs/<cid>`)", gateway_target, (), gateway_seeds),
    Reader("shardcast_http", "raw HTTP request to a Shardcast origin/relay", shardcast_http_target, (),
           shardcast_http_seeds),
]}
