"""The trainer's batch (issue 34: moved out of `Trainer`): which submissions may train the next step, and
their samples, recomputed from the files.

    trusted = trust_pending(state, subs, assigned, quorum=..., wait_s=...)   # the trust rule over the records
    sid, ready = next_ready(protocol, state, trust, train_step=..., async_level=..., exclude=...)
    samples = plan_samples(sid, plan, state=..., cache=..., load=..., ...)   # verified, or None (not now)

The rules: trusted = `intellect.verifier.assignment.trainable` (every stake-weighted slot the chain assigned the
submission attested, or ≥ quorum slots and `trainer.attestation_wait` passed); ready = trusted, pending and
fresh (`intellect.verifier.submission.too_stale`); picked = ready and still unchallenged on-chain, never a
canary. Samples: rewards and advantages recomputed from the completions' text (`verified_samples`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from intellect.agents.grpo import UntrustedValueError, recompute_advantages
from intellect.agents.grpo_trainer import Sample
from intellect.agents.roles._runtime import AgentError
from intellect.agents.roles._state import StateStore
from intellect.agents.roles.attestation_intake import attestation_sets
from intellect.agents.roles.canary import canary_ids
from intellect.agents.roles.submission_log import left_out
from intellect.sdk import IpfsError, TaskStatus
from intellect.verifier.assignment import trainable
from intellect.verifier.difficulty import DIFFICULTY_FILE, table_after
from intellect.verifier.isolation import ParseUnavailable
from intellect.verifier.rewards import JudgeBudget, LengthScope
from intellect.verifier.rollouts import RolloutFile, RolloutFileError
from intellect.verifier.submission import group_rows, score_group, too_stale

__all__ = ["current_plan", "load_rollouts", "next_ready", "plan_samples", "ready_submissions", "train_step",
           "trust_pending", "trusted_submissions", "verified_samples"]

log = logging.getLogger(__name__)


def ready_submissions(trusted: Collection[int], submissions: dict[int, dict[str, Any]], *,
                      train_step: int, async_level: int) -> tuple[list[int], list[int]]:
    """(ready, stale) submission ids: ready = pending, in `trusted` (`trusted_submissions`) and fresh enough
    for training step `train_step`; stale = trusted but too old to ever be used. Pure; ids ascending."""
    ready, stale = [], []
    for sid in sorted(submissions):
        sub = submissions[sid]
        if sub.get("status") != "pending" or sid not in trusted:
            continue
        if too_stale(train_step, sub["policy_step"], async_level):
            stale.append(sid)
        else:
            ready.append(sid)
    return ready, stale


def trusted_submissions(records: list[dict[str, Any]], submissions: dict[int, dict[str, Any]], slots: Any, *,
                        quorum: int, now: float, wait_s: float) -> set[int]:
    """The pending submissions the trainer's rule trusts (`intellect.verifier.assignment.trainable`), from its
    attestation records (`data`: submission_id, validator) and submission records (`seen_at`: when the trainer
    first saw it; a record without one counts as seen at `now`). `slots(submission_id)`: the slots the chain
    assigned it (empty while unknown). Keys, owners and unassigned validators weigh nothing: only the assigned
    stake-weighted slots do. Pure but for `slots`."""
    attesters: dict[int, set[str]] = {}
    for r in records:
        d = r["data"]
        attesters.setdefault(int(d["submission_id"]), set()).add(str(d["validator"]).lower())
    out = set()
    for sid, sub in submissions.items():
        if sub.get("status") != "pending" or sid not in attesters:
            continue
        waited = now - float(sub.get("seen_at", now))
        if trainable(slots(sid), attesters[sid], quorum=quorum, waited_s=waited, wait_s=wait_s):
            out.add(sid)
    return out


def trust_pending(state: StateStore, subs: dict[int, dict[str, Any]], slots: Callable[[int], Any], *,
                  quorum: int, wait_s: float) -> set[int]:
    """The pending submissions of `subs` (id → record data with `status`) the trust rule lets train
    (`trusted_submissions`), reading only their attestations. A record without `seen_at` (written by a trainer
    before issue 33) gets one now, in `subs` and in the state store: its wait starts now."""
    now = time.time()
    pending = sorted(sid for sid, sub in subs.items() if sub["status"] == "pending")
    for sid in pending:
        if "seen_at" not in subs[sid]:
            subs[sid]["seen_at"] = now
            with state.transaction():  # never undo a status the follower set meanwhile
                rec = state.record("submission", sid)
                if rec is not None and rec["status"] == "pending":
                    state.put("submission", sid, "pending", {"seen_at": now})
    records = [{"data": {"submission_id": sid, "validator": v}}
               for sid, validators in attestation_sets(state, pending).items() for v in validators]
    return trusted_submissions(records, subs, slots, quorum=quorum, now=now, wait_s=wait_s)


def next_ready(protocol: Any, state: StateStore, trust: Callable[[dict[int, dict[str, Any]]], Collection[int]], *,
               train_step: int, async_level: int, exclude: Collection[int]) -> tuple[int | None, int]:
    """(the oldest trusted, fresh, still-unchallenged submission not in `exclude`, or None; how many ready ones
    are not canaries). `trust(subs)`: the trusted ids of the submission records (`trust_pending`). Trusted but
    too old ones are marked `stale`; ready ones found challenged on-chain are left out (`left_out`). A canary is
    never picked; past this point its record moves like any other's."""
    subs = {int(r["id"]): r["data"] | {"status": r["status"]} for r in state.records("submission")}
    ready, stale = ready_submissions(trust(subs), subs, train_step=train_step, async_level=async_level)
    for sid in stale:
        state.put("submission", sid, "stale")
    ready = [sid for sid in ready if sid not in exclude]
    canaries = canary_ids(state)
    waiting = sum(1 for sid in ready if sid not in canaries)
    for sid in ready:
        t = protocol.known_task(sid)  # re-check on-chain: never train on challenged (or lost) work
        if t is None or t.status != TaskStatus.SUBMITTED:
            left_out(state, sid, TaskStatus.NONE if t is None else t.status)
            continue
        if sid in canaries:
            continue
        return sid, waiting
    return None, waiting


def verified_samples(rf: Any, task_set: Any, tokenizer: Any, alpha: float,
                     length_scope: LengthScope = "solved") -> tuple[list[Any], dict[str, float]]:
    """The trainer's samples of one rollout file, believing no number its worker wrote.

    Rewards are recomputed from the completions' text with the pool's verifiers and length rule, and
    advantages from those rewards (`grpo.recompute_advantages`, clamped); the file's own reward and
    advantage columns are read only to count how far they were off. Returns (samples, stats) with
    stats `max_reward_diff` and `max_advantage_diff`. Raises `UntrustedValueError` on a reward out of
    range and KeyError for a problem outside the task set.
    """
    samples: list[Any] = []
    stats = {"max_reward_diff": 0.0, "max_advantage_diff": 0.0}
    judge = JudgeBudget()  # the math judge's allowance for the file, as the worker and validators spent it
    for problem_id, rows in group_rows(rf.rows):
        task = task_set[problem_id]
        texts = [tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rows]
        # the protocol's scoring rule; one target length per group (validators check every row's against the seed)
        scored = score_group(task, texts, [len(r.completion_ids) for r in rows], rows[0].target_length, alpha,
                             judge=judge, length_scope=length_scope)
        rewards = [total for _, _, total, _ in scored]
        advantages = recompute_advantages(rewards)
        for r, rw, adv in zip(rows, rewards, advantages, strict=True):
            stats["max_reward_diff"] = max(stats["max_reward_diff"], abs(r.reward - rw))
            stats["max_advantage_diff"] = max(stats["max_advantage_diff"], abs(r.advantage - adv))
            samples.append(Sample(r.problem_id, r.prompt_ids, r.completion_ids, adv, r.policy_step, rw,
                                  source=rf.meta.task_id))
    return samples, stats


def load_rollouts(sid: int, sub: dict[str, Any], *, data_dir: Path, ipfs: Any, max_bytes: int,
                  refresh_peers: Callable[[], None]) -> Any:
    """Submission `sid`'s rollout file (record `sub`), from `data_dir/rollouts` or fetched from IPFS (after
    `refresh_peers`, which should add its worker's node) and kept there; checked against its on-chain record."""
    path = data_dir / "rollouts" / f"{sid}.rollouts"
    if not path.is_file():
        refresh_peers()
        data = ipfs.cat(sub["rollouts_cid"], max_size=max_bytes)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    rf = RolloutFile.read(path)
    if rf.meta.policy_step != sub["policy_step"] or rf.meta.worker.lower() != sub["node"].lower():
        raise AgentError(f"rollout file of submission {sid} does not match its on-chain record")
    return rf


def plan_samples(sid: int, plan: dict[str, Any], *, state: StateStore, cache: dict[int, list[Any]],
                 load: Callable[[int], Any], task_set: Any, tokenizer: Any, length_alpha: float,
                 length_scope: LengthScope) -> list[Any] | None:
    """The verified samples of submission `sid` (its file from `load(sid)`, kept in `cache`: a plan waiting for
    more signal re-reads its submissions every poll), or None (logged, state updated) if it cannot be used now:
    not retrievable yet (tried again later, up to 3 times) or unusable (left out; the plan is dropped)."""
    if sid in cache:
        return cache[sid]
    try:
        got, diffs = verified_samples(load(sid), task_set, tokenizer, length_alpha, length_scope)
        if diffs["max_reward_diff"] > 1e-4 or diffs["max_advantage_diff"] > 1e-3:
            log.warning("submission %d: the file's rewards/advantages are off by %.3g/%.3g from the "
                        "recomputed ones (attested anyway); training on the recomputed values",
                        sid, diffs["max_reward_diff"], diffs["max_advantage_diff"])
        cache[sid] = got
        return got
    except (IpfsError, ParseUnavailable, RolloutFileError, AgentError, UntrustedValueError, KeyError) as exc:
        # attested but not retrievable (its worker went away), not judged (an old Parquet file whose isolated
        # reader this node could not run to its end) or not what was attested: leave it out
        rec = state.record("submission", sid)
        fails = int((rec or {}).get("data", {}).get("load_failures", 0)) + 1
        if fails < 3 and isinstance(exc, IpfsError | ParseUnavailable):
            log.warning("submission %d: rollout file not retrievable or readable yet (%s), try %d", sid, exc, fails)
            state.put("submission", sid, (rec or {}).get("status", "pending"), {"load_failures": fails})
            return None
        log.warning("submission %d left out of step %d: %s", sid, plan["step"], exc)
        state.put("submission", sid, "unusable", {"error": str(exc)[:300]})
        state.set("plan", None)
        return None


def train_step(gt: Any, samples: list[Any], problem_order: str, group_size: int) -> Any:
    """`gt.train_step(samples)`; in an `adaptive` pool (online difficulty filtering) with the next difficulty table,
    the current checkpoint's plus this batch, staged to be written into the checkpoint the step saves."""
    if problem_order == "adaptive":
        gt.checkpoint_files[DIFFICULTY_FILE] = table_after(gt.checkpoint_path(gt.step), samples, group_size).to_bytes()
    return gt.train_step(samples)


def current_plan(protocol: Any, state: StateStore, step: int) -> dict[str, Any]:
    """The state's `plan` for training step `step` (a fresh, empty one if there is none or it is another
    step's). A plan from before a restart (not trained: no `stats`) is re-checked on-chain: if one of its
    submissions was challenged meanwhile, it is left out (`left_out`) and the plan dropped."""
    plan = state.get("plan")
    if plan is not None and plan["step"] != step:
        plan = None
    if plan is not None and "stats" not in plan:
        for sid in plan["submissions"]:
            t = protocol.known_task(sid)
            if t is None or t.status != TaskStatus.SUBMITTED:
                left_out(state, sid, TaskStatus.NONE if t is None else t.status)
                plan = None
        if plan is None:
            state.set("plan", None)
    return plan if plan is not None else {"step": step, "submissions": []}
