"""The demo's summary (`runs/<id>/summary.json`, schema `intellect.demo.summary/v1`): what the final table
and the report show, versioned on disk so the report can be rebuilt from it (`python -m intellect.agents.demo.report`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from intellect.sdk import IntellectError

__all__ = ["SUMMARY_SCHEMA", "DemoError", "DemoSummary", "NodeRow", "ProgressSample", "StepRow"]

SUMMARY_SCHEMA = "intellect.demo.summary/v1"

class DemoError(IntellectError, RuntimeError):
    """The demo could not run to its end; the message says what failed and where the logs are."""


class NodeRow(BaseModel):
    name: str
    role: str
    address: str
    hardware: str
    honest: bool
    stake_before: int
    stake_after: int
    submissions: int
    accepted: int
    challenged: int
    slashed: int
    rewards_claimed: int


class StepRow(BaseModel):
    step: int
    checkpoint_cid: str
    rollouts_used: int | None = None
    mean_reward: float | None = None
    submissions: int = 0
    eval_pass_at_1: float | None = None
    """held-out pass@1 at temperature 0 of the step's checkpoint (when the trainer evaluated it)"""
    eval_mean_reward: float | None = None


class ProgressSample(BaseModel):
    """One tick of the progress display (for the throughput plot)."""

    t: float
    step: int
    submissions: int
    rollouts: int
    tokens: int
    pending_windows: int
    challenges: int


class DemoSummary(BaseModel):
    """`runs/<id>/summary.json`: what the final table and the report show."""

    schema_: str = Field(SUMMARY_SCHEMA, alias="schema")
    run_id: str
    started_at: float
    finished_at: float
    options: dict[str, Any]
    completed: bool
    """True when the swarm reached the target step within the timeout."""
    nodes: list[NodeRow]
    steps: list[StepRow]
    progress: list[ProgressSample] = Field(default_factory=list)
    dashboard_url: str | None = None
    notes: list[str] = Field(default_factory=list)

    model_config = ConfigDict(populate_by_name=True)

    def write(self, path: Path) -> Path:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(by_alias=True, indent=2))
        tmp.replace(path)
        return path

    @classmethod
    def read(cls, path: Path) -> DemoSummary:
        data = json.loads(path.read_text())
        if data.get("schema") != SUMMARY_SCHEMA:
            raise DemoError(f"{path}: schema {data.get('schema')!r} is not {SUMMARY_SCHEMA!r}")
        return cls.model_validate(data)
