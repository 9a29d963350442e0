"""The cheater matrix of the security suite (issue 5): one `Worker` subclass per way to cheat, registered
in `intellect.agents.adversary.ADVERSARIES` (selected by `worker.adversary: <name>`). Tests and demos only.

Each variant misbehaves in exactly one way while claiming to be honest; the test in
tests/security/test_security_cheaters.py runs them against honest validators on a local pool and checks
that every one ends challenged, upheld and slashed (or, for `stale_step`, refused on-chain), and that the
trainer never trains on their rollouts. The check expected to catch each one is in `EXPECTED_REASONS`.

- `quantised`: generates with a 4-bit (per-tensor absmax) quantised copy of the checkpoint.
- `altered_completions`: generates honestly, then changes one token in the middle of every completion.
- `inflated_rewards`: claims task reward 1.0 (and the matching total and advantage) on every row.
- `inflated_units`: claims twice the completion tokens it generated as work units.
- `replay`: takes another worker's latest rollout file and re-labels it as its own answer to its own claim.
- `own_old_work`: re-labels its own previous rollout file as the answer to a new claim.
- `chosen_problems`: answers problems it chose (the first of the task set) instead of the seeded ones.
- `stale_step`: names a policy step outside the async window (older than latest - async_level, or a
  future one while the pool is young): the ledger refuses it, nothing lands on-chain.
- `copied_proofs`: gives each completion the TOPLOC proofs of another completion.
- `garbage_file`: submits a CID of random bytes (not a Parquet rollout file).
- `unresolvable_cid`: submits the CID of content nobody stores.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from intellect.agents.adversary import rewrite_checkpoint
from intellect.agents.worker import PlannedSubmission, Worker

__all__ = ["EXPECTED_REASONS", "MATRIX", "register"]

log = logging.getLogger(__name__)


class QuantisedWorker(Worker):
    """Generates with a crudely quantised copy of the checkpoint (a cheaper model) but claims the real one."""

    BITS = 4

    def engine_checkpoint(self, step: int, path: Path) -> Path:
        import torch

        levels = 2 ** (self.BITS - 1) - 1

        def quantise(v: torch.Tensor) -> torch.Tensor:
            scale = float(v.float().abs().max()) / levels or 1.0
            return (torch.round(v.float() / scale).clamp(-levels, levels) * scale).to(v.dtype)

        out = rewrite_checkpoint(path, self.data_dir / "quantised" / f"step-{step}", quantise)
        log.warning("adversary quantised: generating with a %d-bit copy of step %d", self.BITS, step)
        return out


def _rebuild(rf: Any, rows: list[Any], **meta: Any) -> Any:
    from intellect.agents.rollouts import RolloutFile

    return RolloutFile(rf.meta.model_copy(update=meta) if meta else rf.meta, rows, name=rf.name)


class AlteredCompletionsWorker(Worker):
    """Changes one token in the middle of every completion after generating (proofs and rewards unchanged)."""

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        rf = super().generate_rollouts(task_id, seed, step)
        rows = []
        for r in rf.rows:
            ids = list(r.completion_ids)
            if ids:
                k = len(ids) // 2
                ids[k] = ids[k] - 1 if ids[k] > 0 else ids[k] + 1
            rows.append(r.model_copy(update={"completion_ids": ids}))
        return _rebuild(rf, rows)


class InflatedRewardsWorker(Worker):
    """Claims full task reward on every row (totals and advantages made consistent with it)."""

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        rf = super().generate_rollouts(task_id, seed, step)
        rows = [r.model_copy(update={"task_reward": 1.0, "reward": 1.0 - r.length_penalty, "advantage": 1.0})
                for r in rf.rows]
        return _rebuild(rf, rows)


class InflatedUnitsWorker(Worker):
    """Claims twice the tokens it generated as work units (a bigger reward)."""

    def submission_for(self, task_id: int, rf: Any) -> PlannedSubmission:
        plan = super().submission_for(task_id, rf)
        plan.work_units *= 2
        return plan


class _RelabelWorker(Worker):
    """Base of the copying variants: takes someone's rollout file and re-labels it as its answer to a claim."""

    def source_file(self, task_id: int) -> Any:
        raise NotImplementedError

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        src = self.source_file(task_id)
        if src is None:  # nothing to copy yet: behave honestly until there is (the test waits for a copy)
            return super().generate_rollouts(task_id, seed, step)
        me = self.protocol.address
        rows = [r.model_copy(update={"worker": me}) for r in src.rows]
        log.warning("adversary %s: task %d answered with a copy of %s", self.cfg.worker.adversary, task_id, src.name)
        return _rebuild(src, rows, worker=me, task_id=str(task_id), seed=seed.hex())


class ReplayWorker(_RelabelWorker):
    """Copies another worker's latest rollout file (fetched from IPFS by the CID its submission posted)."""

    def source_file(self, task_id: int) -> Any:
        from intellect.agents.rollouts import RolloutFile

        deadline = time.monotonic() + 120
        while not self.stop_event.is_set() and time.monotonic() < deadline:
            evs = [e for e in self.protocol.get_events(["WorkSubmitted"])
                   if e.args["node"].lower() != self.protocol.address.lower()]
            latest = self.protocol.latest_step(self.pool_id) or 0
            evs = [e for e in evs if int(e.args["policyStep"]) >= latest - self.pool.params.async_level]
            if evs:
                cid = evs[-1].args["rolloutsCid"]
                self.refresh_ipfs_peers()
                try:
                    return RolloutFile.from_bytes(self.ipfs.cat(cid), name=cid)
                except Exception as exc:  # not reachable yet: try again
                    log.info("adversary replay: cannot fetch %s yet: %s", cid, exc)
            self.wait(1.0)
        return None


class OwnOldWorkWorker(_RelabelWorker):
    """Re-submits its own previous rollout file as the answer to a new claim."""

    def source_file(self, task_id: int) -> Any:
        from intellect.agents.rollouts import RolloutFile

        old = sorted((p for p in self.rollouts_dir.glob("task-*.parquet") if p.stem != f"task-{task_id}"),
                     key=lambda p: p.stat().st_mtime)
        return RolloutFile.read(old[-1]) if old else None

    def done(self) -> bool:  # its first (honest) submission does not count towards max_tasks
        limit = self.cfg.worker.max_tasks
        return limit is not None and self.state.count("submission", "sent") >= limit + 1


class ChosenProblemsWorker(Worker):
    """Answers the first problems of the task set (its choice) instead of the ones its claim's seed assigns."""

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        import intellect.verifier.tasks as tasks_mod

        honest = tasks_mod.sample_problems

        def chosen(task_set: Any, seed_: bytes, n: int, budgets: Any) -> Any:
            assigned = honest(task_set, seed_, n, budgets)
            ids = {a.task_id for a in assigned}
            picks = [t for t in task_set.tasks if t.id not in ids][: len(assigned)]
            return [a.model_copy(update={"task_id": t.id, "index": task_set.tasks.index(t)})
                    for a, t in zip(assigned, picks, strict=True)]

        tasks_mod.sample_problems = chosen
        try:
            return super().generate_rollouts(task_id, seed, step)
        finally:
            tasks_mod.sample_problems = honest


class StaleStepWorker(Worker):
    """Submits with a policy step outside the async window; the ledger refuses it."""

    def work_on(self, task_id: int, seed: bytes) -> str:
        from intellect.sdk import ContractRevert

        step = self.current_policy()
        rf = self.generate_rollouts(task_id, seed, step)
        plan = self.submission_for(task_id, rf)
        latest = self.protocol.latest_step(self.pool_id) or 0
        level = self.pool.params.async_level
        bad = latest - level - 1 if latest > level else latest + 1
        try:
            self.protocol.submit_work(task_id, plan.rollouts_cid, bytes.fromhex(plan.proofs_hash[2:]),
                                      plan.work_units, bad)
        except ContractRevert as exc:
            log.warning("adversary stale_step: step %d refused on-chain: %s", bad, exc.name)
            self.count(f"refused:{exc.name}")
            self.state.put("submission", task_id, "refused", {"policy_step": bad, "error": exc.name})
            return "refused"
        self.state.put("submission", task_id, "sent", {"policy_step": bad})
        return "sent"

    def done(self) -> bool:
        limit = self.cfg.worker.max_tasks
        return limit is not None and self.state.count("submission", "refused") + self.state.count(
            "submission", "sent") >= limit


class CopiedProofsWorker(Worker):
    """Gives every completion the proofs of the next completion (as many as it needs, cycled)."""

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        rf = super().generate_rollouts(task_id, seed, step)
        src = list(rf.rows)
        rows = []
        for i, r in enumerate(src):
            other = src[(i + 1) % len(src)].proofs or r.proofs
            proofs = [other[j % len(other)] for j in range(len(r.proofs))] if other else r.proofs
            rows.append(r.model_copy(update={"proofs": proofs}))
        return _rebuild(rf, rows)


class GarbageFileWorker(Worker):
    """Posts the CID of random bytes (served from its IPFS store) instead of a rollout file."""

    def submission_for(self, task_id: int, rf: Any) -> PlannedSubmission:
        plan = super().submission_for(task_id, rf)
        plan.rollouts_cid = self.ipfs.add(b"PAR1" + os.urandom(2048))
        return plan


class UnresolvableCidWorker(Worker):
    """Posts the CID of content that nobody stores."""

    def submission_for(self, task_id: int, rf: Any) -> PlannedSubmission:
        from intellect.sdk.ipfs._cid import Cid

        plan = super().submission_for(task_id, rf)
        plan.rollouts_cid = str(Cid.of(os.urandom(64)))
        return plan


MATRIX: dict[str, type[Worker]] = {
    "quantised": QuantisedWorker,
    "altered_completions": AlteredCompletionsWorker,
    "inflated_rewards": InflatedRewardsWorker,
    "inflated_units": InflatedUnitsWorker,
    "replay": ReplayWorker,
    "own_old_work": OwnOldWorkWorker,
    "chosen_problems": ChosenProblemsWorker,
    "stale_step": StaleStepWorker,
    "copied_proofs": CopiedProofsWorker,
    "garbage_file": GarbageFileWorker,
    "unresolvable_cid": UnresolvableCidWorker,
}

# the validator rejection reason(s) expected for each variant (toploc_* = any TOPLOC/sampling failure)
EXPECTED_REASONS: dict[str, tuple[str, ...]] = {
    "wrong_model": ("toploc_",),
    "quantised": ("toploc_",),
    "altered_completions": ("toploc_", "reward_mismatch"),
    "inflated_rewards": ("reward_mismatch",),
    "inflated_units": ("work_units_mismatch",),
    "replay": ("wrong_problems",),
    "own_old_work": ("wrong_problems",),
    "chosen_problems": ("wrong_problems",),
    "stale_step": (),
    "copied_proofs": ("toploc_",),
    "garbage_file": ("bad_file",),
    "unresolvable_cid": ("unavailable",),
}


def register(table: dict[str, type[Worker]]) -> None:
    """Adds the matrix to `table` (adversary.ADVERSARIES) without replacing a variant already there."""
    for name, cls in MATRIX.items():
        table.setdefault(name, cls)
