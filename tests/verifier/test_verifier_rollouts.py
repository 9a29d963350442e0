"""Rollout files: schema round trip and refusal of bad files."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from intellect.verifier.rollouts import (
    ROLLOUTS_SCHEMA,
    ROLLOUTS_SCHEMA_V1,
    RolloutFile,
    RolloutFileError,
    RolloutMeta,
    RolloutRow,
)

WORKER = "0x" + "ab" * 20
PROOF = bytes(258)


def _file(n_problems: int = 2, group: int = 3, tokens: int = 40) -> RolloutFile:
    rows = []
    for p in range(n_problems):
        for k in range(group):
            rows.append(RolloutRow(
                problem_id=f"p{p}", prompt_ids=[1, 2, 3], completion_ids=list(range(4, 4 + tokens)),
                reward=1.0 - 0.01, task_reward=1.0, length_penalty=0.01, target_length=64,
                advantage=0.5 * (k - 1), policy_step=7, proofs=[PROOF, PROOF], worker=WORKER,
            ))
    meta = RolloutMeta(task_id="42", seed="0xdeadbeef", model="step-7", worker=WORKER, policy_step=7,
                       group_size=group, length_alpha=0.0003)
    return RolloutFile(meta, rows, name="test")


def _table_bytes(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def test_rollout_file_round_trip_bytes_and_path(tmp_path: Path) -> None:
    rf = _file()
    back = RolloutFile.from_bytes(rf.to_bytes())
    assert back.meta == rf.meta
    assert back.rows == rf.rows
    path = rf.write(tmp_path / "r.rollouts")
    assert RolloutFile.read(path).rows == rf.rows
    assert ROLLOUTS_SCHEMA.encode() in path.read_bytes()[:2000]


def test_rollout_file_v1_still_read_through_the_child(tmp_path: Path) -> None:
    """Old Parquet files (`intellect.rollouts/v1`) read back the same rows, parsed in a child process."""
    rf = _file()
    data = rf.to_bytes(version=1)
    assert data[:4] == b"PAR1"
    assert pq.read_schema(pa.BufferReader(data)).metadata[b"schema"] == ROLLOUTS_SCHEMA_V1.encode()
    back = RolloutFile.from_bytes(data, name="cid-old")
    assert back.meta == rf.meta and back.rows == rf.rows and back.name == "cid-old"
    (tmp_path / "old.parquet").write_bytes(data)
    assert RolloutFile.read(tmp_path / "old.parquet").rows == rf.rows


def test_rollout_file_unknown_schema_refused() -> None:
    table = _file().to_table()
    meta = dict(table.schema.metadata)
    meta[b"schema"] = b"intellect.rollouts/v99"
    with pytest.raises(RolloutFileError, match=r"unknown schema 'intellect\.rollouts/v99'"):
        RolloutFile.from_bytes(_table_bytes(table.replace_schema_metadata(meta)))


def test_rollout_file_missing_column_refused() -> None:
    table = _file().to_table()
    bad = table.drop_columns(["advantage"]).replace_schema_metadata(table.schema.metadata)
    with pytest.raises(RolloutFileError, match=r"missing \['advantage'\]"):
        RolloutFile.from_bytes(_table_bytes(bad))


def test_rollout_file_wrong_column_type_refused() -> None:
    table = _file().to_table()
    i = table.schema.get_field_index("policy_step")
    bad = table.set_column(i, "policy_step", table["policy_step"].cast(pa.float64()))
    with pytest.raises(RolloutFileError, match="column 'policy_step' is double"):
        RolloutFile.from_bytes(_table_bytes(bad.replace_schema_metadata(table.schema.metadata)))


def test_rollout_file_corrupt_bytes_refused() -> None:
    data = _file().to_bytes(version=1)
    with pytest.raises(RolloutFileError, match="rollout file cid-x: not a readable Parquet file"):
        RolloutFile.from_bytes(data[: len(data) // 2], name="cid-x")
    data = _file().to_bytes()
    with pytest.raises(RolloutFileError, match="rollout file cid-y: truncated"):
        RolloutFile.from_bytes(data[: len(data) // 2], name="cid-y")


def test_rollout_file_inconsistent_rows_refused() -> None:
    rf = _file()
    wrong_proofs = rf.rows[0].model_copy(update={"proofs": [PROOF]})  # 40 tokens need 2 proofs
    with pytest.raises(RolloutFileError, match="1 proofs for 40 tokens"):
        RolloutFile(rf.meta, [wrong_proofs, *rf.rows[1:]])
    short_proof = rf.rows[0].model_copy(update={"proofs": [PROOF, b"x"]})
    with pytest.raises(RolloutFileError, match="not 258 bytes"):
        RolloutFile(rf.meta, [short_proof, *rf.rows[1:]])
    with pytest.raises(RolloutFileError, match="group size is 3"):
        RolloutFile(rf.meta, rf.rows[:-1])
    bad_sum = rf.rows[0].model_copy(update={"reward": 5.0})
    with pytest.raises(RolloutFileError, match=r"reward 5\.0 != task_reward"):
        RolloutFile(rf.meta, [bad_sum, *rf.rows[1:]])
    other_worker = rf.rows[0].model_copy(update={"worker": "0x" + "cd" * 20})
    with pytest.raises(RolloutFileError, match="names worker"):
        RolloutFile(rf.meta, [other_worker, *rf.rows[1:]])


def test_rollout_file_invalid_row_values_refused() -> None:
    table = _file().to_table()
    i = table.schema.get_field_index("worker")
    bad = table.set_column(i, "worker", pa.array(["not-an-address"] * len(table), pa.string()))
    with pytest.raises(RolloutFileError, match="row 0"):
        RolloutFile.from_bytes(_table_bytes(bad.replace_schema_metadata(table.schema.metadata)))
    j = table.schema.get_field_index("advantage")
    nan = table.set_column(j, "advantage", pa.array([float("nan")] * len(table), pa.float32()))
    with pytest.raises(RolloutFileError, match="must be finite"):
        RolloutFile.from_bytes(_table_bytes(nan.replace_schema_metadata(table.schema.metadata)))
