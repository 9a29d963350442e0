"""The trainer's `/status` document (issue 34: moved out of `Trainer`): its steps, evaluations, submissions
(with their attestations and assigned validators) and consumed ids, each list bounded and its total beside it.
The dashboard and the demo's report read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from intellect.agents.roles._state import StateStore

__all__ = ["trainer_status"]


def trainer_status(doc: dict[str, Any], state: StateStore, n: int, *, policy_step: int | None, max_steps: int,
                   quorum: int, assignments: Mapping[int, tuple[str, ...]], evaluating: bool | None,
                   no_signal: Any) -> dict[str, Any]:
    """`doc` (the runtime's status) with the newest `n` (`server.status_items`) steps, evaluations, submissions
    and consumed ids, oldest first, each list's total beside it: bounded whatever the history (a year of steps
    costs the same request as an hour). `assignments`: the submissions' known assigned validators; `no_signal`:
    the step's `signal.NoSignalReport` or None."""
    steps = [{"step": int(r["id"]), "status": r["status"], "checkpoint_cid": r["data"].get("checkpoint_cid"),
              "submissions": r["data"].get("submissions", []), "rollouts": r["data"].get("rollouts", 0),
              "mean_reward": (r["data"].get("stats") or {}).get("reward_mean"),
              "loss": (r["data"].get("stats") or {}).get("loss")} for r in state.latest("step", n)]
    steps.sort(key=lambda s: s["step"])
    evals = sorted(({"step": int(r["id"]), **r["data"]} for r in state.latest("eval", n)), key=lambda e: e["step"])
    by_step = {e["step"]: e for e in evals}
    for s in steps:  # the dashboard and the demo's report read the held-out numbers per step
        if s["step"] in by_step:
            s["eval_pass_at_1"] = by_step[s["step"]]["pass_at_1"]
            s["eval_mean_reward"] = by_step[s["step"]]["mean_reward"]
    subs = sorted(state.latest("submission", n), key=lambda r: int(r["id"]))
    doc.update({
        "policy_step": policy_step,
        "max_steps": max_steps,
        "steps": steps,
        "steps_total": state.count("step"),
        "consumed": sorted(int(r["id"]) for r in state.latest("submission", n, status="consumed")),
        "consumed_total": state.count("submission", "consumed"),
        "submissions": [{"submission_id": int(r["id"]), "status": r["status"], "node": r["data"].get("node"),
                         "policy_step": r["data"].get("policy_step"),
                         "attestations": sorted({a["data"]["validator"].lower()
                                                 for a in state.with_prefix("attestation", f"{r['id']}:")}),
                         "assigned": sorted(assignments.get(int(r["id"]), ())),
                         "step": r["data"].get("step")} for r in subs],
        "submissions_total": state.count("submission"),
        "quorum": quorum,
        "evals": evals,
        "evals_total": state.count("eval"),
        "evaluating": evaluating,
        "no_signal": no_signal.model_dump() if no_signal is not None else None,
        "warning": no_signal.message if no_signal is not None else None,
    })
    return doc
