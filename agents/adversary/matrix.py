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

Issue 22 (each accepted by 5e47eb6's validator: TOPLOC fp32 + replay within 2.0 + the aggregate):
- `steered_tokens`: at every position, the highest-logit token among those within the old replay
  tolerance (2.0) of the seeded draw, proofs from one prefill of the real checkpoint.
- `eos_padding`: samples on after EOS up to the budget (every token a faithful draw; paid per token).
- `best_prefix`: cuts every completion at its best-scoring proper prefix, proofs from one prefill.
- `quantised_real_proofs`: generates with a 4-bit copy, proves with one prefill of the real checkpoint.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import intellect.agents.generate as tasks_mod  # the rollout builder's view of the assignment
from intellect.agents.adversary import rewrite_checkpoint
from intellect.agents.models import load_model
from intellect.agents.roles.worker import PlannedSubmission, Worker
from intellect.sdk import ContractRevert
from intellect.sdk.ipfs import Cid
from intellect.verifier.capture import generate_with_states
from intellect.verifier.completion import eos_token_ids
from intellect.verifier.difficulty import table_for
from intellect.verifier.prefill import prefill_hidden_states
from intellect.verifier.replay import gumbel_noise, masked_scores, problem_seed, sample_seed
from intellect.verifier.rewards import JudgeBudget, applied_length_penalty, reward
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow
from intellect.verifier.submission import prompt_text, score_group
from intellect.verifier.tasks import assign_problems
from intellect.verifier.toploc import build_proofs

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
        rows = []
        for r in rf.rows:  # a solved row carries the length term (an unsolved one's is 0)
            lp = applied_length_penalty(1.0, r.target_length, len(r.completion_ids), rf.meta.length_alpha)
            rows.append(r.model_copy(update={"task_reward": 1.0, "length_penalty": lp, "reward": 1.0 - lp,
                                             "advantage": 1.0}))
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
        old = sorted((p for p in self.rollouts_dir.glob("task-*.rollouts") if p.stem != f"task-{task_id}"),
                     key=lambda p: p.stat().st_mtime)
        return RolloutFile.read(old[-1]) if old else None

    def done(self) -> bool:  # its first (honest) submission does not count towards max_tasks
        limit = self.cfg.worker.max_tasks
        return limit is not None and self.state.count("submission", "sent") >= limit + 1


class ChosenProblemsWorker(Worker):
    """Answers the first problems of the task set (its choice) instead of the ones its claim's seed assigns."""

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        honest = tasks_mod.assign_problems

        def chosen(task_set: Any, order: Any, **kw: Any) -> Any:
            assigned = honest(task_set, order, **kw)
            ids = {a.task_id for a in assigned}
            picks = [t for t in task_set.tasks if t.id not in ids][: len(assigned)]
            return [a.model_copy(update={"task_id": t.id, "index": task_set.tasks.index(t)})
                    for a, t in zip(assigned, picks, strict=True)]

        tasks_mod.assign_problems = chosen
        try:
            return super().generate_rollouts(task_id, seed, step)
        finally:
            tasks_mod.assign_problems = honest


class StaleStepWorker(Worker):
    """Submits with a policy step outside the async window; the ledger refuses it."""

    def work_on(self, task_id: int, seed: bytes) -> str:
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
        plan = super().submission_for(task_id, rf)
        plan.rollouts_cid = str(Cid.of(os.urandom(64)))
        return plan


class _ProvenWithRealModel(Worker):
    """Base of the issue-22 variants: chooses its completions its own way, then proves them with one
    prefill of the real checkpoint (so TOPLOC sees the real model's states) and scores them honestly."""

    def real_model(self, step: int) -> Any:
        cache = self.__dict__.setdefault("_real_models", {})
        if step not in cache:
            cache.clear()
            cache[step] = load_model(self.follower.path(step)).eval()
        return cache[step]

    def choose(self, model: Any, prompt: list[int], budget: int, base_seed: int, n: int,
               eos: frozenset[int]) -> list[list[int]]:
        raise NotImplementedError

    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:

        w = self.cfg.worker
        model = self.real_model(step)
        tok = self.engine.tokenizer
        eos = eos_token_ids(model, tok)
        rows = []
        judge = JudgeBudget()  # one per file, as the honest builder (agents.generate) and validators spend it
        t = self.cfg.tasks
        assigned = assign_problems(self.task_set, t.problem_order, seed=seed, task_id=task_id,
                                   n=w.problems_per_task, target_lengths=self.budgets,
                                   difficulty=table_for(t.problem_order, self.follower.path(step), w.group_size))
        for k, a in enumerate(assigned):
            task = self.task_set[a.task_id]
            prompt = list(tok(prompt_text(task, a.target_len), add_special_tokens=False)["input_ids"])
            self.current_task = task
            comps = self.choose(model, prompt, a.target_len, problem_seed(seed, k), w.group_size, eos)
            states = prefill_hidden_states(model, [prompt] * len(comps), comps)
            texts = [tok.decode(c, skip_special_tokens=True) for c in comps]
            scored = score_group(task, texts, [len(c) for c in comps], a.target_len, self.cfg.tasks.length_alpha,
                                 judge=judge, length_scope=self.cfg.tasks.length_scope)
            for c, h, (tr, lp, total, adv) in zip(comps, states, scored, strict=True):
                rows.append(RolloutRow(problem_id=task.id, prompt_ids=prompt, completion_ids=c, reward=total,
                                       task_reward=tr, length_penalty=lp, target_length=a.target_len, advantage=adv,
                                       policy_step=step, proofs=build_proofs(h), worker=self.protocol.address))
        log.warning("adversary %s: task %d answered with chosen completions", self.cfg.worker.adversary, task_id)
        meta = RolloutMeta(task_id=str(task_id), seed=seed.hex(), model=self.manifest_cid(step),
                           worker=self.protocol.address, policy_step=step, group_size=w.group_size,
                           length_alpha=self.cfg.tasks.length_alpha)
        return RolloutFile(meta, rows, name=f"task-{task_id}")


def steered_completion(model: Any, prompt: list[int], budget: int, seed: int, tolerance: float = 2.0,
                       temperature: float = 1.0, eos: frozenset[int] = frozenset()) -> list[int]:
    """Issue 22's steering: at each position the highest-logit token whose replay margin under the seeded
    sampler is within `tolerance` (the seeded draw itself has margin 0, so there is always one)."""
    import torch

    out: list[int] = []
    with torch.inference_mode():
        for p in range(budget):
            logits = model(input_ids=torch.tensor([prompt + out])).logits[0, -1:].float()  # (1, V)
            scores = masked_scores(logits, temperature)[0] + gumbel_noise(seed, p, logits.shape[-1])  # (V,)
            allowed = scores >= scores.max() - tolerance
            out.append(int(torch.where(allowed, logits[0], torch.full_like(logits[0], -torch.inf)).argmax()))
            if out[-1] in eos:
                break
    return out


class SteeredTokensWorker(_ProvenWithRealModel):
    """Picks the most likely token within the replay tolerance of each seeded draw (a mode-seeking policy
    that the trainer would mistake for its own samples)."""

    TOLERANCE = 2.0

    def choose(self, model, prompt, budget, base_seed, n, eos):  # type: ignore[no-untyped-def]

        return [steered_completion(model, prompt, budget, sample_seed(base_seed, i), self.TOLERANCE,
                                   self.cfg.tasks.temperature, eos) for i in range(n)]


class EosPaddingWorker(_ProvenWithRealModel):
    """Samples faithfully but ignores EOS: every completion runs to its budget (paid per token)."""

    def choose(self, model, prompt, budget, base_seed, n, eos):  # type: ignore[no-untyped-def]

        gens = generate_with_states(model, [prompt] * n, budget, seed=base_seed,
                                    temperature=self.cfg.tasks.temperature)
        return [g.completion_ids for g in gens]


class BestPrefixWorker(_ProvenWithRealModel):
    """Samples faithfully, then cuts every completion at its best-scoring proper prefix."""

    def choose(self, model, prompt, budget, base_seed, n, eos):  # type: ignore[no-untyped-def]

        gens = generate_with_states(model, [prompt] * n, budget, seed=base_seed,
                                    temperature=self.cfg.tasks.temperature, eos_ids=sorted(eos))
        tok, task, alpha = self.engine.tokenizer, self.current_task, self.cfg.tasks.length_alpha
        out = []
        for g in gens:
            ids = g.completion_ids
            if len(ids) < 2:
                out.append(ids)
                continue
            scores = {k: reward(task, tok.decode(ids[:k], skip_special_tokens=True), budget, k, alpha,
                                length_scope=self.cfg.tasks.length_scope).total
                      for k in range(1, len(ids))}
            out.append(ids[: max(scores, key=lambda k: (scores[k], k))])
        return out


class QuantisedRealProofsWorker(_ProvenWithRealModel):
    """Generates with a 4-bit copy of the checkpoint (the seeded sampler on the cheap model's logits) and
    builds the proofs from one prefill of the real checkpoint (issue 22: 64/64 passed 5e47eb6)."""

    BITS = 4

    def choose(self, model, prompt, budget, base_seed, n, eos):  # type: ignore[no-untyped-def]
        import copy

        import torch

        cache = self.__dict__.setdefault("_cheap", {})
        if id(model) not in cache:
            cache.clear()
            cheap = copy.deepcopy(model)
            levels = 2 ** (self.BITS - 1) - 1
            with torch.no_grad():
                for p in cheap.parameters():
                    scale = float(p.abs().max()) / levels or 1.0
                    p.copy_(torch.round(p / scale).clamp(-levels, levels) * scale)
            cache[id(model)] = cheap
        gens = generate_with_states(cache[id(model)], [prompt] * n, budget, seed=base_seed,
                                    temperature=self.cfg.tasks.temperature, eos_ids=sorted(eos))
        return [g.completion_ids for g in gens]


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
    "steered_tokens": SteeredTokensWorker,
    "eos_padding": EosPaddingWorker,
    "best_prefix": BestPrefixWorker,
    "quantised_real_proofs": QuantisedRealProofsWorker,
}

# the validator rejection reason(s) expected for each variant (toploc_* = any TOPLOC/sampling failure)
EXPECTED_REASONS: dict[str, tuple[str, ...]] = {
    "wrong_model": ("toploc_",),
    "quantised": ("toploc_",),
    # the altered token may be a short completion's final EOS (or become one): the end-of-completion check
    # (issue 22) then fires before TOPLOC does; rewards are recomputed only after the replay (issue 32)
    "altered_completions": ("toploc_", "cut_short", "tokens_after_eos"),
    "inflated_rewards": ("reward_mismatch",),
    "inflated_units": ("work_units_mismatch",),
    "replay": ("wrong_problems",),
    "own_old_work": ("wrong_problems",),
    "chosen_problems": ("wrong_problems",),
    "stale_step": (),
    "copied_proofs": ("toploc_",),
    "garbage_file": ("bad_file",),
    "unresolvable_cid": ("unavailable",),
    "steered_tokens": ("toploc_replay",),
    "eos_padding": ("tokens_after_eos",),
    "best_prefix": ("cut_short",),
    "quantised_real_proofs": ("toploc_replay",),
}


def register(table: dict[str, type[Worker]]) -> None:
    """Adds the matrix to `table` (adversary.ADVERSARIES) without replacing a variant already there."""
    for name, cls in MATRIX.items():
        table.setdefault(name, cls)
