"""The pool's GRPO path against TRL's `GRPOTrainer`: same model, tasks, hyper-parameters and machine, one run.

Usage (from the repository root; TRL lives in the opt-in .venv-trl, `make bench-trl` builds it and runs this):
    .venv-trl/bin/python bench/grpo/pool_vs_trl.py --out runs/pool-vs-trl                 # tiny warm-started model
    .venv-trl/bin/python bench/grpo/pool_vs_trl.py --model smollm2 --lr 2e-5 --steps 4 --eval-every 2 \
        --prompts-per-step 4 --group-size 4 --max-new-tokens 16 --heldout-tasks 20    # the real pretrained model
    .venv/bin/python bench/grpo/pool_vs_trl.py --dry-run          # the resolved settings; needs no trl

The defaults (tiny model, 80 rollout steps of 16 × 8, evaluation every 10) ran in 41–230 s end to end on the
shared 2-core machine, depending on its load (docs/benchmarks-grpo.md, "Against TRL's GRPOTrainer").

What each side runs, from the same base model directory, on the same training problems, for the same number
of rollout steps (generation rounds) of `prompts_per_step` problems × `group_size` completions:

(a) **the pool path, in one process** — the worker's rollout code and the trainer, as the pool runs them:
    an inference thread samples with `TransformersEngine` (TOPLOC proof capture on, as a worker must; `--no-proofs`
    drops it), scores and computes group advantages with the worker's rollout builder
    (`intellect.agents.generate.rollout_rows` → the verifier's `score_group` / `task_reward`), writes an
    `intellect.rollouts/v1` Parquet file per `problems_per_submission` problems (a worker's submission); the
    trainer thread reads and validates them (`RolloutFile.read`) and builds each step's batch as the trainer role
    does: stale submissions skipped (`too_stale`) and — online filtering — further submissions taken until the
    batch has `prompts_per_step` groups with signal (`grpo_trainer.signal_groups`, the role's own criterion;
    `--no-refill`: one generation round per step, whatever its signal; `--min-signal-groups K` tops a round with
    fewer than K groups with signal up from further submissions), then trains one step with
    `intellect.agents.grpo_trainer.GRPOTrainer` (staleness check, zero-advantage filter, old
    log-probs recomputed, `optimizer_steps` updates), writes the checkpoint (safetensors + optimizer state) and
    the inference thread hot-swaps to it; rollouts run up to `async_level` rounds ahead (the pool's default 2).
    **Not included** (each would add its own time, none changes what is learnt): the chain (task claims, submitWork,
    rewards), IPFS, Shardcast's checkpoint broadcast, validators rescoring the files and checking TOPLOC proofs,
    and the separate worker processes. The full local swarm (`make demo`) needs ~175 s for 12 steps of the tiny
    model on this machine (docs/benchmarks.md, dashboard row): it does not fit a 10-minute comparison here.
(b) **TRL 1.16 `GRPOTrainer`**, single process, synchronous (generate, then train): `reward_funcs` is the
    verifier's `task_reward` through `verifier_reward` (the same function the pool scores with), `num_generations`
    = group size, `per_device_train_batch_size × steps_per_generation` = one rollout step's completions with
    `steps_per_generation` = the pool's `optimizer_steps` (the same updates per rollout step), loss `dr_grpo`
    (per-token sum over a constant batch × max-completion-tokens denominator: the pool's loss), group-normalised
    advantages (std, as `group_advantages`), ε, δ (two-sided clip), KL β, constant lr, AdamW betas (0.9, 0.99),
    weight decay 0.01, grad-norm clip as the pool's trainer.

Differences left (documented, not hidden): the pool drops zero-advantage groups before the loss and refills the
batch past them, so a pool step trains on at least `prompts_per_step` groups with signal but may have generated
several rounds for it (TRL keeps flat groups in its loss with zero advantage, so its per-token denominator counts
them); the pool samples with its own engine (same temperature, no top-k/top-p on either side; its per-token
log-probs equal a clean forward pass's to 2e-5 and its draws match softmax, chi-square, docs/benchmarks-grpo.md);
the pool assigns each submission's problems as the network does (`assign_problems` under the pool rule
`problem_order`: by default its ledger task id's slot in seeded shuffled passes, every problem once per pass;
`--problem-order random`: drawn from each claim's seed, so a problem may come back before others were seen;
`--problem-order adaptive`: online difficulty filtering, drawn from each claim's seed with the weights of the
difficulty table the pool side's trainer writes into every checkpoint, `intellect.verifier.difficulty`; TRL's side,
having no such filter, then walks the same seeded draws with every problem weighed alike); by
default TRL walks the pool side's problem sequence (`--trl-order pool`: round b's problems at TRL's step b), so
at equal steps both train on the same problems until a pool round is refilled past or spent flat
(`--trl-order shuffled`: TRL's own shuffled epochs); the pool's rollouts may be up to `async_level` policy steps
stale.

Common random numbers (`--trl-sampler pool`): TRL's side then generates each round through TRL's `rollout_func`
with the pool's engine and the pool side's seeded draws, from TRL's current weights. Round 0 is the pool side's
round 0 token for token; later rounds share the noise but not the weights. With `--async-level 0` on the pool
side, a difference in the curves is then the two trainers' (and what their weights make of the same noise), not
which answers each side's sampler happened to draw.

Evaluation, outside both timed regions: every `eval_every` steps each side's checkpoint is kept and, after that
side's training (then deleted: a real model's checkpoints take GBs), scored on the held-out problems (and on the training problems, which RL optimises directly):
pass@1 at temperature 0 (one greedy completion per problem through `TransformersEngine`, graded by `task_reward`).
Both sides count completions *generated* and *trained* (in groups with signal, i.e. non-zero advantages: what
moves the weights). Two tables: at equal training steps (the pool's refills may have generated more), and at
equal generated completions (the pool's last checkpoint that had generated no more than TRL at that row; those
checkpoints are kept as the pool passes TRL's counts). Wall-clock = seconds since the
side started (model load included, evaluation and the bench's own checkpoint copies excluded). The wall-clock tax
is pool time / TRL time to the same accuracy (the highest both reach), and at equal samples; the CPU seconds of
each side are printed too (steadier than wall-clock on a machine shared with other jobs).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import click

from intellect.sdk.poolrules import PROBLEM_ORDERS, ProblemOrder

log = logging.getLogger("pool_vs_trl")

RUN_MARKER = ".pool-vs-trl-run"
BENCH_WORKER = "0x" + "b3" * 20


# ------------------------------------------------------------------------------------------
# settings (pure)


@dataclass(frozen=True)
class BenchConfig:
    """Everything both sides share (recorded with the results)."""

    model: str = "tiny-warm"
    """`tiny-warm` (the pool trainer's warm-started tiny Llama, `warm_start_cached()`), `smollm2`, or a model dir"""
    steps: int = 80
    """rollout steps (generation rounds) of each side"""
    prompts_per_step: int = 16
    group_size: int = 8
    optimizer_steps: int = 2
    lr: float = 3e-4
    kl_coef: float = 0.0
    epsilon: float = 0.2
    delta: float = 4.0
    max_grad_norm: float = 0.1
    max_new_tokens: int = 8
    temperature: float = 1.0
    async_level: int = 2
    refill: bool = True
    """pool side: refill a step's batch with further submissions until it has `prompts_per_step` groups with
    signal, as the trainer role does (`trainer.batch_groups`, online filtering); off: train on what one
    generation round gave (fewer groups, or no step at all when every group is flat)"""
    min_signal_groups: int = 0
    """pool side, with `--no-refill`: a step takes its one generation round and, when that round has fewer than
    this many groups with signal, further submissions until it has them (a bounded refill: the trainer role's
    `batch_groups` criterion with a floor below the round); 0: the round whatever its signal"""
    problems_per_submission: int = 2
    """pool side: problems (groups) per rollout file, a worker's submission (`worker.problems_per_task`)"""
    length_alpha: float = 0.0
    """pool side only (TRL has no length term: use with `--only pool`): the pool rules' length α. Above 0, as
    the pool's workers and the trainer's evaluation do, every prompt carries the thinking-budget suffix for
    `max_new_tokens` (the target length, also the sampling cap) and the reward is task − α·|target − length|"""
    eval_every: int = 10
    train_tasks: int = 64
    """with `tiny-warm`: the warm start's own problem set (`synthetic:64:0`); else synthetic problems of `seed`"""
    heldout_tasks: int = 100
    seed: int = 0
    proofs: bool = True
    threads: int = 2
    """torch threads: TRL's single process gets them all; the pool's two threads (inference, trainer) one each"""
    taskset: str | None = None
    eval_tasks: str | None = None
    filter_samples: int = 0
    """above 0: INTELLECT-2's offline difficulty filter on the training problems before either side starts
    (`intellect.agents.tasks.filter_by_difficulty`, what `intellect taskset filter` runs): `filter_samples`
    completions of each problem from the base model, prompted and sampled as both sides sample (temperature,
    `max_new_tokens`, chat template); problems whose solve rate lies in [`filter_low`, `filter_high`] are kept and
    both sides train on the same kept set. Not timed; the held-out set is not filtered"""
    filter_low: float = 0.1
    filter_high: float = 0.8
    problem_order: ProblemOrder = "epochs"
    """pool side, the pool rule `problem_order` (`intellect.verifier.tasks.assign_problems`, what workers and
    validators run): `epochs` (each submission's problems are its ledger task id's slot in seeded shuffled passes
    over the training set: every problem once per pass, as TRL's sampler walks epochs) or `random` (each
    submission's problems drawn from its claim seed: pools made before the rule)"""

    trl_order: Literal["pool", "shuffled"] = "pool"
    """TRL side: `pool` (TRL walks the pool side's problem sequence — round b's problems at its step b, dataset
    in that order, `shuffle_dataset` off — so at equal steps both sides train on the same problems, and a
    difference is the pipeline's, not which problems a short run happened to draw) or `shuffled` (TRL's own
    seeded epochs, as before session 9)"""
    trl_sampler: Literal["trl", "pool"] = "trl"
    """TRL side: `trl` (TRL's own generation, `model.generate`) or `pool` (common random numbers: TRL's trainer
    generates each round through `rollout_func` with the pool side's engine and draws — the Gumbel sampler, the
    pool side's base seed `seed × 100003 + round`, prompts in the pool's order — from TRL's current weights, so
    round 0 is the pool side's round 0 token for token and a later difference is the trainers', not the draws'.
    Needs `trl_order` `pool`. TRL's wall-clock then includes the pool engine's generation: compare its curve,
    not its time)"""

    def __post_init__(self) -> None:
        for name in ("steps", "prompts_per_step", "group_size", "optimizer_steps", "eval_every", "max_new_tokens",
                     "heldout_tasks", "threads", "problems_per_submission"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (a GRPO group needs two completions)")
        if self.filter_samples < 0 or not 0.0 <= self.filter_low <= self.filter_high <= 1.0:
            raise ValueError(f"need filter_samples >= 0 and 0 <= filter_low <= filter_high <= 1 (got "
                             f"{self.filter_samples}, [{self.filter_low}, {self.filter_high}])")
        if self.trl_order not in ("pool", "shuffled"):
            raise ValueError(f"trl_order must be 'pool' or 'shuffled' (got {self.trl_order!r})")
        if self.trl_sampler not in ("trl", "pool"):
            raise ValueError(f"trl_sampler must be 'trl' or 'pool' (got {self.trl_sampler!r})")
        if self.trl_sampler == "pool" and self.trl_order != "pool":
            raise ValueError("trl_sampler 'pool' draws the pool side's rounds, so TRL must walk the pool side's "
                             "problem sequence: use trl_order 'pool'")
        if self.problem_order not in PROBLEM_ORDERS:
            raise ValueError(f"problem_order must be one of {PROBLEM_ORDERS} (got {self.problem_order!r})")
        if not 0.0 <= self.length_alpha <= 1.0:
            raise ValueError(f"length_alpha must be in [0, 1] (got {self.length_alpha})")
        if self.length_alpha * self.max_new_tokens >= 1.0:  # the rule `intellect pool create` applies
            raise ValueError(f"length_alpha {self.length_alpha} × max_new_tokens {self.max_new_tokens} >= 1: a solved "
                             f"answer far below the target would score <= 0, no better than a wrong one")
        if not 0 <= self.min_signal_groups <= self.prompts_per_step:
            raise ValueError(f"min_signal_groups must be in [0, prompts_per_step = {self.prompts_per_step}] "
                             f"(got {self.min_signal_groups})")
        if self.min_signal_groups and self.refill:
            raise ValueError("min_signal_groups is the no-refill path's floor (the refill already waits for "
                             "prompts_per_step groups with signal): add --no-refill")
        if self.prompts_per_step % self.problems_per_submission:
            raise ValueError(f"prompts_per_step = {self.prompts_per_step} is not divisible by "
                             f"problems_per_submission = {self.problems_per_submission}")
        if self.samples_per_step % self.optimizer_steps:
            raise ValueError(f"prompts_per_step × group_size = {self.samples_per_step} is not divisible by "
                             f"optimizer_steps = {self.optimizer_steps} (TRL's per-device batch)")

    @property
    def target_len(self) -> int | None:
        """The thinking budget in every prompt (None: no budget, no length term)."""
        return self.max_new_tokens if self.length_alpha > 0 else None

    @property
    def submissions_per_round(self) -> int:
        """Submissions (claims of `problems_per_submission` problems) in one generation round."""
        return self.prompts_per_step // self.problems_per_submission

    @property
    def samples_per_step(self) -> int:
        return self.prompts_per_step * self.group_size

    def eval_steps(self) -> list[int]:
        """Rollout steps whose checkpoints are evaluated (0 = the base model, and always the last)."""
        return sorted({0, *range(self.eval_every, self.steps + 1, self.eval_every), self.steps})

    def trl_args(self) -> dict[str, Any]:
        """The keyword arguments of TRL's `GRPOConfig` that carry this config (output_dir added by the caller)."""
        return {
            "per_device_train_batch_size": self.samples_per_step // self.optimizer_steps,
            "steps_per_generation": self.optimizer_steps,
            "num_iterations": 1,
            "num_generations": self.group_size,
            "max_steps": self.steps * self.optimizer_steps,
            "max_completion_length": self.max_new_tokens,
            "temperature": self.temperature,
            "top_p": 1.0,
            "top_k": 0,
            "learning_rate": self.lr,
            "lr_scheduler_type": "constant",
            "warmup_steps": 0,
            "weight_decay": 0.01,
            "adam_beta1": 0.9,
            "adam_beta2": 0.99,
            "max_grad_norm": self.max_grad_norm,
            "beta": self.kl_coef,
            "epsilon": self.epsilon,
            "delta": self.delta,
            "loss_type": "dr_grpo",
            "scale_rewards": "group",
            "seed": self.seed,
            "shuffle_dataset": self.trl_order == "shuffled",
            "use_cpu": True,
            "bf16": False,
            "report_to": "none",
            "save_strategy": "no",
            "logging_steps": self.optimizer_steps,
            "disable_tqdm": True,
            "dataloader_num_workers": 0,
        }


# ------------------------------------------------------------------------------------------
# the reward adapter (pure: no trl needed)


def _completion_text(completion: Any) -> str:
    """TRL passes a completion as a string (standard prompts) or a list of messages (conversational prompts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    raise TypeError(f"unexpected completion {type(completion).__name__}: {completion!r:.80}")


def signal_samples(task_ids: Sequence[str], rewards: Sequence[float], group_size: int) -> int:
    """Completions of one generation batch that sit in a group with signal (not every reward equal): the samples
    whose advantage is non-zero-able, i.e. those the pool's zero-advantage filter would keep. TRL lays a batch out
    as `group_size` consecutive completions of one prompt (its RepeatSampler); a batch that is not laid out so is
    grouped by task id."""
    if len(task_ids) != len(rewards):
        raise ValueError(f"{len(task_ids)} task ids but {len(rewards)} rewards")
    n = len(task_ids)
    chunks = [range(i, min(i + group_size, n)) for i in range(0, n, group_size)]
    if n % group_size or any(len({task_ids[j] for j in c}) != 1 for c in chunks):
        by_id: dict[str, list[int]] = {}
        for j, tid in enumerate(task_ids):
            by_id.setdefault(tid, []).append(j)
        chunks = list(by_id.values())  # type: ignore[arg-type]
    return sum(len(c) for c in chunks if len({rewards[j] for j in c}) > 1)


def verifier_reward(tasks: Any, group_size: int | None = None, counts: dict[str, int] | None = None,
                    record: list[dict[str, Any]] | None = None) -> Callable[..., list[float]]:
    """A TRL reward function (`reward_funcs=[...]`) that scores with the verifier's `task_reward`, as the pool's
    workers and validators do. The dataset must carry a `task_id` column: TRL passes it as a keyword (one id per
    completion) and the task is looked up in `tasks` (a `TaskSet` or any mapping id → `Task`). With `counts`
    (and `group_size`), every call adds its completions to `counts["generated"]` and those in groups with signal
    to `counts["signal"]` (`signal_samples`). With `record`, one entry per completion is appended (task id,
    reward, completion tokens: what TRL trained on, for comparing its data with the pool's rollout files)."""
    from intellect.verifier.rewards import task_reward

    by_id = {t.id: t for t in tasks} if not isinstance(tasks, dict) else dict(tasks)

    def verifier_task_reward(prompts: Sequence[Any], completions: Sequence[Any], task_id: Sequence[str],
                             **_: Any) -> list[float]:
        if len(task_id) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(task_id)} task ids")
        out = []
        for tid, completion in zip(task_id, completions, strict=True):
            if tid not in by_id:
                raise KeyError(f"task id {tid!r} is not in the training set")
            out.append(float(task_reward(by_id[tid], _completion_text(completion))))
        if record is not None:
            ids = _.get("completion_ids") or [None] * len(out)
            call = len(record) // max(len(out), 1)
            record.extend({"call": call, "task_id": tid, "reward": r,
                           "completion_ids": list(c) if c is not None else None}
                          for tid, r, c in zip(task_id, out, ids, strict=True))
        if counts is not None:
            counts["generated"] = counts.get("generated", 0) + len(out)
            counts["signal"] = counts.get("signal", 0) + signal_samples(task_id, out, group_size or len(out))
        return out

    return verifier_task_reward


# ------------------------------------------------------------------------------------------
# curves and the table (pure)


@dataclass
class Point:
    """One evaluated checkpoint of one side."""

    step: int
    """training steps (pool: trainer steps; TRL: rollout steps = generation rounds)"""
    samples: int
    """completions generated so far (the pool's include those of flat groups it refilled past, and stale ones)"""
    wall_s: float
    heldout: float | None = None
    train: float | None = None
    """pass@1 (T=0) on the training problems: what RL optimised directly"""
    checkpoint: str | None = None
    heldout_tokens: float | None = None
    """mean completion length (tokens) of the held-out greedy answers"""
    heldout_at_cap: float | None = None
    """share of the held-out greedy answers that ran to the `max_new_tokens` cap"""
    trained: int | None = None
    """completions so far in groups with signal (non-zero advantages): those that move the weights (the pool
    drops the others before the loss; TRL keeps them in the loss with zero advantage)"""


@dataclass
class SideResult:
    name: str
    points: list[Point]
    wall_s: float
    """the side's whole training (start → last step), evaluation excluded"""
    train_rewards: list[float] = field(default_factory=list)
    load_before: str = ""
    load_after: str = ""
    cpu_s: float = 0.0
    """CPU seconds of the process (all its threads) over the side's training: less sensitive to other jobs than
    the wall-clock (OpenMP threads that spin while descheduled still count)"""
    extra: dict[str, Any] = field(default_factory=dict)


def _metric(p: Point, metric: str) -> float | None:
    return p.heldout if metric == "heldout" else p.train


def first_reaching(points: Sequence[Point], target: float, metric: str = "heldout") -> Point | None:
    """The first evaluated checkpoint whose `metric` (heldout / train) is ≥ target (None: never)."""
    for p in points:
        v = _metric(p, metric)
        if v is not None and v >= target - 1e-12:
            return p
    return None


def time_to(points: Sequence[Point], target: float, metric: str = "heldout") -> float | None:
    """Wall-clock seconds at the first checkpoint reaching `target` (None: never)."""
    p = first_reaching(points, target, metric)
    return None if p is None else p.wall_s


def samples_to(points: Sequence[Point], target: float, metric: str = "heldout") -> int | None:
    """Samples at the first checkpoint reaching `target` (None: never)."""
    p = first_reaching(points, target, metric)
    return None if p is None else p.samples


def summarize(pool: SideResult, trl: SideResult) -> dict[str, Any]:
    """The comparison figures, for held-out and training pass@1: start and final accuracy of each side, the
    common target (the highest accuracy both reach, if above the start), time and samples to it on each side and
    the tax there (pool / TRL time), and the tax at equal samples (the whole run)."""
    at_equal = pool_at_generated(pool.points, trl.points[-1].samples)
    out: dict[str, Any] = {"wall_pool_s": pool.wall_s, "wall_trl_s": trl.wall_s,
                           "tax_equal_steps": pool.wall_s / trl.wall_s if trl.wall_s > 0 else None,
                           "tax_equal_samples": (at_equal.wall_s / trl.wall_s
                                                 if at_equal is not None and trl.wall_s > 0 else None),
                           "generated_pool": pool.points[-1].samples, "generated_trl": trl.points[-1].samples,
                           "trained_pool": pool.points[-1].trained, "trained_trl": trl.points[-1].trained,
                           "cpu_pool_s": pool.cpu_s, "cpu_trl_s": trl.cpu_s,
                           "cpu_ratio": pool.cpu_s / trl.cpu_s if trl.cpu_s > 0 else None}
    for metric in ("heldout", "train"):
        start = min(_metric(pool.points[0], metric) or 0.0, _metric(trl.points[0], metric) or 0.0)
        final_pool = _metric(pool.points[-1], metric) or 0.0
        final_trl = _metric(trl.points[-1], metric) or 0.0
        best = min(max(_metric(p, metric) or 0.0 for p in pool.points),
                   max(_metric(p, metric) or 0.0 for p in trl.points))
        m: dict[str, Any] = {"start": start, "final_pool": final_pool, "final_trl": final_trl,
                             "final_diff": final_pool - final_trl, "target": None, "time_to_target_pool_s": None,
                             "time_to_target_trl_s": None, "tax_to_target": None}
        if best > start + 1e-12:  # both learnt something: time each to the best level both reach
            tp, tt = time_to(pool.points, best, metric), time_to(trl.points, best, metric)
            m.update(target=best, time_to_target_pool_s=tp, time_to_target_trl_s=tt,
                     samples_to_target_pool=samples_to(pool.points, best, metric),
                     samples_to_target_trl=samples_to(trl.points, best, metric),
                     tax_to_target=(tp / tt) if tp is not None and tt else None)
        out[metric] = m
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def pool_at_generated(points: Sequence[Point], samples: int) -> Point | None:
    """The last evaluated pool checkpoint that had generated no more than `samples` completions."""
    within = [p for p in points if p.samples <= samples]
    return max(within, key=lambda p: (p.samples, p.step)) if within else None


def build_table(pool: SideResult, trl: SideResult, by: str = "step") -> str:
    """Markdown, one row per evaluated TRL checkpoint, against the pool's checkpoint at the same training step
    (`by="step"`: the pool's refilled batches may have generated more) or the pool's last checkpoint that had
    generated no more completions (`by="generated"`: equal generation cost). Generated and trained (in groups
    with signal) completions of both sides are shown."""
    if by not in ("step", "generated"):
        raise ValueError(f"by must be step or generated, not {by!r}")
    rows = ["| step pool / TRL | generated pool / TRL | trained pool / TRL | pool held-out | TRL held-out "
            "| pool train | TRL train | pool wall s | TRL wall s | wall pool/TRL |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    pool_by_step = {p.step: p for p in pool.points}
    for q in trl.points:
        p = pool_by_step.get(q.step) if by == "step" else pool_at_generated(pool.points, q.samples)
        ratio = p.wall_s / q.wall_s if p is not None and p.step > 0 and q.wall_s > 0 else None
        pv: dict[str, Any] = {} if p is None else asdict(p)
        rows.append(f"| {_fmt(pv.get('step'), 'd')} / {q.step} | {_fmt(pv.get('samples'), 'd')} / {q.samples} "
                    f"| {_fmt(pv.get('trained'), 'd')} / {_fmt(q.trained, 'd')} "
                    f"| {_fmt(pv.get('heldout'), '.3f')} | {_fmt(q.heldout, '.3f')} "
                    f"| {_fmt(pv.get('train'), '.3f')} | {_fmt(q.train, '.3f')} "
                    f"| {_fmt(pv.get('wall_s') if pv.get('step') else None, '.1f')} "
                    f"| {_fmt(q.wall_s if q.step else None, '.1f')} | {_fmt(ratio, '.2f')} |")
    return "\n".join(rows)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------------
# model and tasks


def resolve_model(model: str) -> Path:
    if model == "tiny-warm":
        from intellect.agents.warmstart import warm_start_cached

        return warm_start_cached()
    if model == "smollm2":
        from intellect.agents.models import smollm2_dir

        return smollm2_dir()
    path = Path(model)
    if not (path / "config.json").is_file():
        raise click.BadParameter(f"{model} is neither tiny-warm, smollm2 nor an HF model directory")
    return path


def load_tasks(cfg: BenchConfig) -> tuple[Any, Any]:
    """(train, held-out) task sets, disjoint by prompt."""
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.tasks import TaskSet

    if cfg.taskset:
        train = TaskSet.load(cfg.taskset)
        if not cfg.eval_tasks:
            raise click.UsageError("--taskset needs --eval-tasks (the held-out split)")
        heldout = TaskSet.load(cfg.eval_tasks)
        return train, heldout
    if cfg.model == "tiny-warm":
        from intellect.agents.warmstart import WarmStartRecipe

        r = WarmStartRecipe()  # the problems the pool's warm start saw in question format (synthetic:64:0)
        train = synthetic_task_set(r.tasks, seed=r.task_seed, max_operand=r.max_operand, ops=("+",),
                                   name=f"synthetic:{r.tasks}:{r.task_seed}")
    else:
        train = synthetic_task_set(cfg.train_tasks, seed=cfg.seed, max_operand=20, ops=("+",), name="train")
    heldout = synthetic_task_set(cfg.heldout_tasks, seed=cfg.seed + 1, max_operand=20, ops=("+",),
                                 exclude_prompts=[t.prompt for t in train], name="heldout")
    return train, heldout


FILTER_CACHE_SCHEMA = "intellect.bench.filter-rates/v1"
DEFAULT_FILTER_CACHE = Path.home() / ".cache" / "intellect" / "bench-filter"


def filter_cache_key(model_dir: Path, prompts: Sequence[tuple[str, str]], params: Any, samples: int) -> str:
    """What the filter's solve rates depend on: the weights (every safetensors file's bytes), each task and the
    exact prompt it is sampled with (chat template and budget suffix included), the sampler and the count."""
    h = hashlib.sha256(FILTER_CACHE_SCHEMA.encode())
    weights = sorted(model_dir.glob("*.safetensors"))
    if not weights:
        raise click.ClickException(f"{model_dir} has no *.safetensors weights to key the difficulty filter's cache")
    for w in weights:
        h.update(w.name.encode())
        with w.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    h.update(json.dumps({"prompts": list(prompts), "samples": samples, "params": params.model_dump(mode="json")},
                        sort_keys=True, default=str).encode())
    return h.hexdigest()


def read_filter_cache(path: Path) -> dict[str, float] | None:
    """The solve rates stored at `path` (None: nothing stored); a file that is not such a store is refused by
    name."""
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except ValueError as exc:
        raise click.ClickException(f"{path}: not JSON ({exc}); delete the file to measure again") from exc
    schema = doc.get("schema") if isinstance(doc, dict) else None
    if schema != FILTER_CACHE_SCHEMA:
        raise click.ClickException(f"{path}: schema {schema!r}, expected {FILTER_CACHE_SCHEMA!r}; delete the file "
                                   f"to measure again")
    try:
        return {str(k): float(v) for k, v in doc["rates"].items()}
    except (KeyError, AttributeError, TypeError, ValueError) as exc:
        raise click.ClickException(f"{path}: 'rates' is not an object of task id -> solve rate ({exc!r}); delete "
                                   f"the file to measure again") from exc


def difficulty_filter(cfg: BenchConfig, model_dir: Path, train: Any,
                      cache_dir: Path | None = None) -> tuple[Any, dict[str, Any]]:
    """The training problems whose base-model solve rate lies in [filter_low, filter_high] (`filter_samples`
    completions each, prompted and sampled as both sides sample), and what the filter saw.

    With `cache_dir`, the measured rates are stored there under a key of everything they depend on
    (`filter_cache_key`) and a later run with the same inputs reads them instead of sampling again (the filter
    is seeded, so it would measure the same rates; `seen["cache"]` says which happened)."""
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.tasks import filter_by_difficulty, select_by_rate
    from intellect.verifier.submission import prompt_text

    torch.set_num_threads(cfg.threads)
    t0 = time.perf_counter()
    tokenizer = _tokenizer(model_dir)
    params = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature, seed=cfg.seed,
                            capture_proofs=False)

    def fmt(t: Any) -> str:
        return prompt_text(t, cfg.target_len, tokenizer)

    cache = None if cache_dir is None else cache_dir / (
        filter_cache_key(model_dir, [(t.model_dump_json(), fmt(t)) for t in train], params, cfg.filter_samples)
        + ".json")
    stored = None if cache is None else read_filter_cache(cache)
    if stored is not None:
        rates = stored
        kept = select_by_rate(train, rates, cfg.filter_low, cfg.filter_high)
    else:
        engine = TransformersEngine()
        engine.load(model_dir)
        kept, rates = filter_by_difficulty(train, engine, params, samples=cfg.filter_samples, low=cfg.filter_low,
                                           high=cfg.filter_high, prompt_format=fmt)
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            tmp = cache.with_suffix(".tmp")
            tmp.write_text(json.dumps({"schema": FILTER_CACHE_SCHEMA, "rates": rates}))
            tmp.replace(cache)
    seen = {"candidates": len(train), "kept": len(kept), "samples": cfg.filter_samples,
            "range": [cfg.filter_low, cfg.filter_high], "seconds": round(time.perf_counter() - t0, 1),
            "cache": "off" if cache is None else ("hit" if stored is not None else "stored") + f" {cache}",
            "mean_rate_all": sum(rates.values()) / len(rates),
            "mean_rate_kept": sum(rates[t.id] for t in kept) / len(kept), "rates": rates}
    return kept, seen


def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return tok if getattr(tok, "chat_template", None) else None


# ------------------------------------------------------------------------------------------
# (a) the pool path


def make_rollouts(engine: Any, problems: Sequence[Any], params: Any, group_size: int, tokenizer: Any, *,
                  policy_step: int, task_id: str, seed: int, problems_per_file: int, target_len: int | None = None,
                  length_alpha: float = 0.0) -> list[Any]:
    """`group_size` completions of each problem (one batched call, base seed `seed`), scored and given group
    advantages by the workers' rollout builder (`rollout_rows`), as `intellect.rollouts/v1` files of
    `problems_per_file` problems each (`submission_files`). The prompts are `prompt_text(task, None, tokenizer)`:
    the chat template of an instruct model, as the pool's workers write them (`generate_for_claim`); the bare text
    for the tiny model. `target_len`: the thinking budget in the prompt and the length term's target (scored with
    `length_alpha`), as `generate_for_claim` does."""
    from intellect.agents.generate import rollout_rows
    from intellect.verifier.rollouts import RolloutMeta
    from intellect.verifier.submission import prompt_text

    prompts = [prompt_text(t, target_len, tokenizer) for t in problems for _ in range(group_size)]
    gens = engine.generate(prompts, params.model_copy(update={"seed": seed}))
    groups = [rollout_rows(task, target_len, gens[g * group_size:(g + 1) * group_size], length_alpha=length_alpha,
                           policy_step=policy_step, worker=BENCH_WORKER) for g, task in enumerate(problems)]
    meta = RolloutMeta(task_id=task_id, seed=f"{seed:x}", model=str(engine.checkpoint_dir), worker=BENCH_WORKER,
                       policy_step=policy_step, group_size=group_size, length_alpha=length_alpha)
    return submission_files(meta, groups, problems_per_file)


def submission_files(meta: Any, groups: Sequence[Sequence[Any]], problems: int) -> list[Any]:
    """One generation round's groups (one per problem, in claim order) as submissions of `problems` groups each,
    as that many workers' files would arrive; file k is task `<meta.task_id>-k`. A problem may come twice in one
    round (two claims in different passes of the epochs order) but not twice in one claim, so never in one file."""
    from intellect.verifier.rollouts import RolloutFile

    parts = []
    for k in range(0, len(groups), problems):
        rows = [row for group in groups[k:k + problems] for row in group]
        task_id = f"{meta.task_id}-{k // problems}"
        parts.append(RolloutFile(meta.model_copy(update={"task_id": task_id}), rows, name=task_id))
    return parts


def _keep(src: Path, dst: Path) -> None:
    """Keep a checkpoint for the evaluation (hard links: no copy, survives the trainer's pruning)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link)


def round_problems(cfg: BenchConfig, train: Any, b: int, difficulty: Any = None) -> list[Any]:
    """Generation round b's problems as the network assigns them: the round's submissions are consecutive ledger
    task ids, each claim's problems from `assign_problems` under the pool's problem order (its chain seed stood
    in for by a hash of the bench seed and the task id; only the problems are used, not the target lengths).
    `difficulty`: under `adaptive`, the table of the checkpoint the round is generated with (None: the empty
    table, every problem alike: what TRL's side walks, having no online filtering)."""
    from intellect.verifier.difficulty import DifficultyTable
    from intellect.verifier.tasks import assign_problems

    if cfg.problem_order == "adaptive" and difficulty is None:
        difficulty = DifficultyTable.empty(cfg.group_size)

    per_round = cfg.submissions_per_round
    out: list[Any] = []
    for i in range(per_round):
        task_id = b * per_round + i + 1  # the ledger's ids start at 1
        claim_seed = hashlib.sha256(f"pool-vs-trl/{cfg.seed}/{task_id}".encode()).digest()
        for a in assign_problems(train, cfg.problem_order, seed=claim_seed, task_id=task_id,
                                 n=cfg.problems_per_submission, target_lengths=[cfg.max_new_tokens],
                                 difficulty=difficulty):
            out.append(train[a.task_id])
    return out


def may_generate(b: int, done_rounds: int, async_level: int, trainer_starved: bool) -> bool:
    """Whether the inference thread may generate round `b` now, with the latest checkpoint, without the round
    going stale before the trainer takes it. `done_rounds`: rounds whose submissions went into a finished step
    (or were spent: flat, stale); the latest checkpoint is then at least that many steps minus the rounds that
    made none, and round `b` is taken at most `b - done_rounds` steps later, so `b - done_rounds <= async_level`
    keeps it fresh (counting rounds merely taken, as before, let it be taken one step too late: in the session-10
    runs 64 of 320 completions went stale). `trainer_starved`: the trainer is waiting on an empty queue, so the
    round is taken by the step being built now and is fresh whatever the count (without it, a batch refilled
    past more than `async_level` rounds would wait forever)."""
    return trainer_starved or b - done_rounds <= async_level


def batch_complete(cfg: BenchConfig, taken: int, signal: int) -> bool:
    """Whether a pool step's batch is built, after `taken` fresh submissions with `signal` groups with signal:
    with the refill, once it has `prompts_per_step` such groups (the trainer role's `batch_groups`); without,
    once it has one generation round and at least `min_signal_groups` such groups."""
    if cfg.refill:
        return signal >= cfg.prompts_per_step
    return taken >= cfg.submissions_per_round and signal >= cfg.min_signal_groups


def train_pool(cfg: BenchConfig, model_dir: Path, train: Any, out: Path) -> SideResult:
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.grpo_trainer import (
        GRPOConfig,
        GRPOTrainer,
        NoSignalError,
        Sample,
        latest_checkpoint,
        signal_groups,
    )
    from intellect.verifier.difficulty import DIFFICULTY_FILE, table_after, table_for
    from intellect.verifier.rollouts import RolloutFile
    from intellect.verifier.submission import too_stale

    torch.set_num_threads(1)
    load_before = _load()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    excluded = 0.0  # the bench's own checkpoint keeping
    ckpt_dir, rollouts_dir, evals = out / "checkpoints", out / "rollouts", out / "evals"
    for d in (rollouts_dir, evals):
        d.mkdir(parents=True)
    trainer = GRPOTrainer(model_dir, ckpt_dir, GRPOConfig(
        lr=cfg.lr, optimizer_steps=cfg.optimizer_steps, max_grad_norm=cfg.max_grad_norm, epsilon=cfg.epsilon,
        delta=cfg.delta, kl_coef=cfg.kl_coef, max_completion_tokens=cfg.max_new_tokens,
        async_level=cfg.async_level, seed=cfg.seed, keep_checkpoints=2))  # the evaluated ones are hard-linked
    trainer.save_checkpoint()
    tokenizer = _tokenizer(model_dir)
    params = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature, capture_proofs=cfg.proofs)
    eval_at = set(cfg.eval_steps())
    # TRL's evaluated points have generated k × samples_per_step completions: the pool's last checkpoint at or
    # below each of those is kept too (the comparison at equal generation cost)
    milestones = sorted({k * cfg.samples_per_step for k in cfg.eval_steps()} - {0})
    points = [Point(0, 0, 0.0, checkpoint=str(model_dir), trained=0)]
    gen_engine = TransformersEngine()
    out_q: queue.Queue[Path | BaseException | None] = queue.Queue()
    stop = threading.Event()
    per_round = cfg.submissions_per_round
    consumed = [0]  # submissions taken by the trainer
    done = [0]  # submissions in finished steps (or spent), see `may_generate`
    starved = threading.Event()  # the trainer waits on an empty queue

    max_rounds = cfg.steps * 20

    def inference() -> None:
        torch.set_num_threads(1)
        try:
            for b in range(max_rounds):
                while not stop.is_set() and not may_generate(b, done[0] // per_round, cfg.async_level,
                                                             starved.is_set() and out_q.empty()):
                    time.sleep(0.002)
                if stop.is_set():
                    return
                latest = latest_checkpoint(ckpt_dir)
                if latest is not None and latest != gen_engine.checkpoint_dir:
                    gen_engine.load(latest)  # hot swap
                problems = round_problems(cfg, train, b, table_for(
                    cfg.problem_order, gen_engine.checkpoint_dir or ckpt_dir / "step-0", cfg.group_size))
                parts = make_rollouts(gen_engine, problems, params, cfg.group_size, tokenizer,
                                      policy_step=gen_engine.policy_step or 0, task_id=f"bench-{b}",
                                      seed=round_seed(cfg, b), problems_per_file=cfg.problems_per_submission,
                                      target_len=cfg.target_len, length_alpha=cfg.length_alpha)
                for k, part in enumerate(parts):
                    out_q.put(part.write(rollouts_dir / f"round-{b}-sub-{k}.rollouts"))
            out_q.put(None)  # generation budget spent
        except BaseException as exc:  # surfaced in the trainer thread
            out_q.put(exc)

    def next_submission() -> Any:
        if out_q.empty():
            starved.set()
        try:
            item = out_q.get()
        finally:
            starved.clear()
        if item is None:
            raise RuntimeError(f"pool: {max_rounds} generation rounds spent before {cfg.steps} trainer steps")
        if isinstance(item, BaseException):
            raise RuntimeError("pool inference thread failed") from item
        consumed[0] += 1
        return RolloutFile.read(item)

    worker = threading.Thread(target=inference, name="pool-inference", daemon=True)
    worker.start()
    rewards: list[float] = []
    flat = stale = generated = trained = 0
    submissions_per_step: list[int] = []
    last_wall = 0.0
    try:
        while trainer.step < cfg.steps:
            # one step's batch, as the trainer role builds it (`Trainer.train_once`): submissions in order, stale
            # ones skipped, and — online filtering — further submissions until `signal_groups` reaches the batch
            samples: list[Any] = []
            taken = 0
            gen_before = generated
            while True:
                rf = next_submission()
                generated += len(rf)
                rewards.append(sum(r.task_reward for r in rf) / max(len(rf), 1))
                if too_stale(trainer.step, rf.meta.policy_step, cfg.async_level):
                    stale += len(rf)
                    continue
                samples += [Sample.from_row(r, rf.meta.task_id) for r in rf]
                taken += 1
                if batch_complete(cfg, taken, signal_groups(samples)):
                    break
            # the checkpoint that stands for "generated ≤ m" for every milestone m this batch passes
            if any(gen_before <= m < generated for m in milestones) and trainer.step > 0 \
                    and points[-1].step != trainer.step:
                t0 = time.perf_counter()
                dst = evals / f"step-{trainer.step}"
                _keep(trainer.checkpoint_path(), dst)
                excluded += time.perf_counter() - t0
                points.append(Point(trainer.step, gen_before, last_wall, checkpoint=str(dst), trained=trained))
            if cfg.problem_order == "adaptive":  # online difficulty filtering: the next table rides the checkpoint
                trainer.checkpoint_files[DIFFICULTY_FILE] = table_after(
                    trainer.checkpoint_path(), samples, cfg.group_size).to_bytes()
            try:
                stats = trainer.train_step(samples)
            except NoSignalError as exc:  # all groups flat (only without refill): no step, the round is spent
                log.info("pool: %s", exc)
                flat += 1
                done[0] = consumed[0]
                continue
            done[0] = consumed[0]  # after the checkpoint is written: the next rounds get this policy
            trained += stats.samples
            submissions_per_step.append(taken)
            last_wall = time.perf_counter() - t_start - excluded
            if trainer.step in eval_at:
                t0 = time.perf_counter()
                dst = evals / f"step-{trainer.step}"
                _keep(trainer.checkpoint_path(), dst)
                excluded += time.perf_counter() - t0
                points.append(Point(trainer.step, generated, last_wall, checkpoint=str(dst), trained=trained))
    finally:
        stop.set()
        worker.join(timeout=60)
    wall = time.perf_counter() - t_start - excluded
    cpu = time.process_time() - cpu_start
    gen_s = float(gen_engine.stats["generate_seconds"])
    log.info("pool: %d trainer steps, %d completions generated (%d stale), %d trained; submissions per step %s",
             trainer.step, generated, stale, trained, submissions_per_step)
    return SideResult("pool", points, wall, rewards, load_before, _load(), cpu,
                      {"flat_batches": flat, "trainer_steps": trainer.step, "generate_s": gen_s,
                       "proofs": cfg.proofs, "async_level": cfg.async_level, "refill": cfg.refill,
                       "generated": generated, "stale": stale, "trained": trained,
                       "submissions_per_step": submissions_per_step})


# ------------------------------------------------------------------------------------------
# (b) TRL


def trl_available() -> bool:
    try:
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


def round_seed(cfg: BenchConfig, b: int) -> int:
    """The base sampling seed of generation round `b` (the pool side's, and TRL's with `trl_sampler` `pool`)."""
    return cfg.seed * 100003 + b


def pool_rollout_func(cfg: BenchConfig, model_dir: Path) -> Callable[[Sequence[Any], Any], dict[str, Any]]:
    """TRL's `rollout_func` for `trl_sampler` `pool`: call k (TRL's generation round k) copies the trainer's live
    weights into the pool's engine (`load_weights`, no disk) and samples the prompts as `make_rollouts` samples
    the pool side's round k: the same engine, sampler and base seed `round_seed` (TRL lays its batch out as the
    pool does, `group_size` consecutive copies of each prompt in round order). TOPLOC capture is off: it does not
    change a token. TRL computes the old log-probabilities itself (`logprobs` None), as for its own samples."""
    from intellect.agents.engines import SamplingParams, TransformersEngine

    engine = TransformersEngine()
    engine.load(model_dir)
    params = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature, capture_proofs=False)
    calls = [0]

    def rollout(prompts: Sequence[Any], trainer: Any) -> dict[str, Any]:
        b = calls[0]
        calls[0] += 1
        if b > 0:  # round 0 samples the base model, as the pool side's does
            engine.load_weights(trainer.model.state_dict(), policy_step=b)
        if any(not isinstance(p, str) for p in prompts):
            raise TypeError("trl_sampler 'pool' takes plain-text prompts (the chat template already applied)")
        gens = engine.generate(list(prompts), params.model_copy(update={"seed": round_seed(cfg, b)}))  # no_grad inside
        return {"prompt_ids": [list(g.prompt_ids) for g in gens],
                "completion_ids": [list(g.completion_ids) for g in gens], "logprobs": None}

    return rollout


def train_trl(cfg: BenchConfig, model_dir: Path, train: Any, out: Path) -> SideResult:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from intellect.verifier.submission import prompt_text

    torch.set_num_threads(cfg.threads)
    load_before = _load()
    t_start, cpu_start = time.perf_counter(), time.process_time()
    excluded = [0.0]
    evals = out / "evals"
    evals.mkdir(parents=True)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    chat_tok = tok if getattr(tok, "chat_template", None) else None
    # the prompt as plain text (chat template already applied for an instruct model, as the pool's workers do)
    problems = ([t for b in range(cfg.steps) for t in round_problems(cfg, train, b)] if cfg.trl_order == "pool"
                else list(train))
    ds = Dataset.from_list([{"prompt": prompt_text(t, None, chat_tok), "task_id": t.id} for t in problems])
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    eval_every_updates = cfg.eval_every * cfg.optimizer_steps
    points = [Point(0, 0, 0.0, checkpoint=str(model_dir), trained=0)]
    rewards: list[float] = []
    counts: dict[str, int] = {"generated": 0, "signal": 0}  # filled by the reward function, once per generation

    class Keep(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, model: Any = None, **kw: Any) -> None:
            g = state.global_step
            if g % eval_every_updates and g != cfg.steps * cfg.optimizer_steps:
                return
            wall = time.perf_counter() - t_start - excluded[0]
            t0 = time.perf_counter()
            rounds = g // cfg.optimizer_steps
            dst = evals / f"round-{rounds}"
            model.save_pretrained(dst, safe_serialization=True)
            tok.save_pretrained(dst)
            excluded[0] += time.perf_counter() - t0
            points.append(Point(rounds, counts["generated"], wall, checkpoint=str(dst), trained=counts["signal"]))

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                rewards.append(float(logs["reward"]))

    args = GRPOConfig(output_dir=str(out / "trl-out"), **cfg.trl_args())
    record: list[dict[str, Any]] = []
    reward = verifier_reward(train, cfg.group_size, counts, record)
    extra: dict[str, Any] = {}
    if cfg.trl_sampler == "pool":
        os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16
        extra["rollout_func"] = pool_rollout_func(cfg, model_dir)
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=args, train_dataset=ds,
                          processing_class=tok, callbacks=[Keep()], **extra)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # one dict per log step on stdout otherwise (rewards kept by Keep)
    trainer.train()
    wall = time.perf_counter() - t_start - excluded[0]
    cpu = time.process_time() - cpu_start
    # what TRL trained on, one line per completion (the pool's are its rollout files)
    (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in record))
    import trl

    return SideResult("trl", points, wall, rewards, load_before, _load(), cpu,
                      {"trl": trl.__version__, "sampler": cfg.trl_sampler, "generated": counts["generated"],
                       "trained": counts["signal"]})


# ------------------------------------------------------------------------------------------
# evaluation


def evaluate_points(sides: Sequence[SideResult], heldout: Any, train: Any, cfg: BenchConfig, model_dir: Path,
                    cache: dict[str, tuple[float, float, float, float]] | None = None) -> None:
    """pass@1 at temperature 0 on the held-out problems (and the training ones) for every kept checkpoint
    (`cache`: results by checkpoint path, shared between calls: the base model is scored once)."""
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.verifier.rewards import task_reward
    from intellect.verifier.submission import prompt_text

    torch.set_num_threads(cfg.threads)
    engine = TransformersEngine()
    greedy = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=0.0, seed=0, capture_proofs=False)
    tokenizer = _tokenizer(model_dir)

    def pass_at_1(tasks: list[Any]) -> tuple[float, float, float]:
        """(pass@1, mean completion tokens, share at the cap); prompts with the thinking budget when the pool's
        length term is on, as the trainer's own evaluation prompts (`agents/evaluation.py`)."""
        gens = engine.generate([prompt_text(t, cfg.target_len, tokenizer) for t in tasks], greedy)
        lens = [len(g.completion_ids) for g in gens]
        return (sum(float(task_reward(t, g.text)) for t, g in zip(tasks, gens, strict=True)) / len(tasks),
                sum(lens) / len(lens), sum(n >= cfg.max_new_tokens for n in lens) / len(lens))

    cache = {} if cache is None else cache
    for side in sides:
        for p in side.points:
            key = str(p.checkpoint)
            if key not in cache:
                engine.load(Path(key))
                held, tokens, at_cap = pass_at_1(list(heldout))
                cache[key] = (held, pass_at_1(list(train))[0], tokens, at_cap)
                log.info("%s step %d: pass@1 (T=0) held-out %.3f, train %.3f; held-out answers %.1f tokens, "
                         "%.0f%% at the cap", side.name, p.step, *cache[key][:3], 100 * cache[key][3])
            p.heldout, p.train, p.heldout_tokens, p.heldout_at_cap = cache[key]


# ------------------------------------------------------------------------------------------
# CLI


@click.command(help=__doc__.split("\n\n")[0])
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/pool-vs-trl"), show_default=True,
              help="output directory (wiped first if it is one of this bench's)")
@click.option("--model", default=BenchConfig.model, show_default=True, help="tiny-warm, smollm2 or an HF model dir")
@click.option("--steps", type=int, default=BenchConfig.steps, show_default=True, help="rollout steps of each side")
@click.option("--prompts-per-step", type=int, default=BenchConfig.prompts_per_step, show_default=True)
@click.option("--group-size", type=int, default=BenchConfig.group_size, show_default=True)
@click.option("--optimizer-steps", type=int, default=BenchConfig.optimizer_steps, show_default=True)
@click.option("--lr", type=float, default=BenchConfig.lr, show_default=True)
@click.option("--kl", "kl_coef", type=float, default=BenchConfig.kl_coef, show_default=True, help="KL coefficient β")
@click.option("--epsilon", type=float, default=BenchConfig.epsilon, show_default=True)
@click.option("--delta", type=float, default=BenchConfig.delta, show_default=True)
@click.option("--max-grad-norm", type=float, default=BenchConfig.max_grad_norm, show_default=True)
@click.option("--max-new-tokens", type=int, default=BenchConfig.max_new_tokens, show_default=True)
@click.option("--temperature", type=float, default=BenchConfig.temperature, show_default=True)
@click.option("--async-level", type=int, default=BenchConfig.async_level, show_default=True, help="pool side only")
@click.option("--refill/--no-refill", default=BenchConfig.refill, show_default=True,
              help="pool side: refill each step's batch past flat groups, as the trainer role does")
@click.option("--min-signal-groups", type=int, default=BenchConfig.min_signal_groups, show_default=True,
              help="pool side, with --no-refill: take further submissions while a step's round has fewer groups "
                   "with signal than this")
@click.option("--problems-per-submission", type=int, default=BenchConfig.problems_per_submission,
              show_default=True, help="pool side: groups per rollout file (a worker's problems_per_task)")
@click.option("--length-alpha", type=float, default=BenchConfig.length_alpha, show_default=True,
              help="pool side only: the pool's length α, with the thinking budget = --max-new-tokens in every prompt")
@click.option("--eval-every", type=int, default=BenchConfig.eval_every, show_default=True)
@click.option("--heldout-tasks", type=int, default=BenchConfig.heldout_tasks, show_default=True)
@click.option("--train-tasks", type=int, default=BenchConfig.train_tasks, show_default=True)
@click.option("--seed", type=int, default=BenchConfig.seed, show_default=True)
@click.option("--proofs/--no-proofs", default=BenchConfig.proofs, show_default=True,
              help="TOPLOC proof capture in the pool's rollouts (a worker must)")
@click.option("--threads", type=int, default=BenchConfig.threads, show_default=True)
@click.option("--taskset", type=click.Path(exists=True, dir_okay=False), default=None,
              help="training task set file (intellect.taskset/v1); default synthetic addition")
@click.option("--eval-tasks", type=click.Path(exists=True, dir_okay=False), default=None,
              help="held-out task set file (with --taskset)")
@click.option("--filter-samples", type=int, default=BenchConfig.filter_samples, show_default=True,
              help="offline difficulty filter: base-model samples per training problem (0: off)")
@click.option("--filter-low", type=float, default=BenchConfig.filter_low, show_default=True)
@click.option("--filter-high", type=float, default=BenchConfig.filter_high, show_default=True)
@click.option("--problem-order", type=click.Choice(PROBLEM_ORDERS), default=BenchConfig.problem_order,
              show_default=True, help="pool side, the pool rule problem_order: each submission's problems from its "
                                      "task id's slot in seeded shuffled passes, or drawn from its claim seed")
@click.option("--trl-order", type=click.Choice(["pool", "shuffled"]), default=BenchConfig.trl_order,
              show_default=True, help="TRL side: the pool side's problem sequence (the same problems at equal "
                                      "steps) or TRL's own shuffled epochs")
@click.option("--trl-sampler", type=click.Choice(["trl", "pool"]), default=BenchConfig.trl_sampler,
              show_default=True, help="TRL side: TRL's own generation, or the pool side's engine and seeded draws "
                                      "from TRL's weights (common random numbers: round 0 equals the pool's)")
@click.option("--filter-cache", type=click.Path(file_okay=False, path_type=Path), default=DEFAULT_FILTER_CACHE,
              show_default=True, help="where the difficulty filter's measured solve rates are kept, keyed by the "
                                      "weights, prompts and sampler: a run with the same inputs reads them "
                                      "instead of sampling again")
@click.option("--no-filter-cache", is_flag=True, help="measure the filter's solve rates and keep nothing")
@click.option("--only", type=click.Choice(["both", "pool", "trl"]), default="both", show_default=True)
@click.option("--dry-run", is_flag=True, help="print the resolved settings (and TRL's GRPOConfig arguments) and stop")
def main(out: Path, only: str, dry_run: bool, filter_cache: Path | None, no_filter_cache: bool, **settings: Any) -> None:
    cfg = BenchConfig(**settings)
    filter_cache = None if no_filter_cache else filter_cache
    if dry_run:
        click.echo(json.dumps({"config": asdict(cfg), "eval_steps": cfg.eval_steps(), "trl_args": cfg.trl_args(),
                               "trl_available": trl_available()}, indent=2))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if cfg.length_alpha > 0 and only != "pool":
        raise click.UsageError("--length-alpha is a pool-side setting (TRL's reward has no length term): "
                               "add --only pool")
    if only in ("both", "trl") and not trl_available():
        raise click.ClickException("trl is not installed in this interpreter: run `make bench-trl` (it builds "
                                   ".venv-trl with tools/bootstrap-trl.sh), or pass --only pool")
    if out.exists() and any(out.iterdir()):
        if not (out / RUN_MARKER).is_file():
            raise click.ClickException(f"{out} exists and is not a pool-vs-trl run directory; refusing to wipe it")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / RUN_MARKER).write_text("bench/grpo/pool_vs_trl.py run directory (wiped by the next run)\n")
    t0 = time.perf_counter()
    model_dir = resolve_model(cfg.model)
    prepare_s = time.perf_counter() - t0
    train, heldout = load_tasks(cfg)
    filtered: dict[str, Any] | None = None
    if cfg.filter_samples:
        train, filtered = difficulty_filter(cfg, model_dir, train, filter_cache)
        click.echo(f"difficulty filter: kept {filtered['kept']}/{filtered['candidates']} training problems with a "
                   f"solve rate in [{cfg.filter_low}, {cfg.filter_high}] ({cfg.filter_samples} samples each, "
                   f"{filtered['seconds']:.0f} s, not counted; cache {filtered['cache']}; mean rate "
                   f"{filtered['mean_rate_all']:.3f} -> {filtered['mean_rate_kept']:.3f})")
    click.echo(f"model {model_dir} ({prepare_s:.0f} s to prepare, not counted); {len(train)} training problems, "
               f"{len(heldout)} held-out; load {_load()}")
    sides: list[SideResult] = []
    scores: dict[str, tuple[float, float, float, float]] = {}
    for name, run in (("pool", train_pool), ("trl", train_trl)):
        if only not in ("both", name):
            continue
        side = run(cfg, model_dir, train, out / name)
        sides.append(side)
        click.echo(f"{name}: {cfg.steps} steps in {side.wall_s:.1f} s, {side.cpu_s:.1f} CPU s (load {side.load_after})")
        # scored now and dropped: a real model's checkpoints (and the pool's optimizer state) take GBs of disk
        evaluate_points([side], heldout, train, cfg, model_dir, scores)
        for sub in ("checkpoints", "evals", "trl-out"):
            shutil.rmtree(out / name / sub, ignore_errors=True)
    report: dict[str, Any] = {"config": asdict(cfg), "model_dir": str(model_dir), "load_end": _load(),
                              "difficulty_filter": filtered, "sides": [asdict(s) for s in sides]}
    if len(sides) == 2:
        pool, trl_side = sides
        table = build_table(pool, trl_side)
        table_generated = build_table(pool, trl_side, by="generated")
        summary = summarize(pool, trl_side)
        report["summary"], report["table"], report["table_equal_generated"] = summary, table, table_generated
        click.echo("at equal training steps:\n" + table)
        click.echo("at equal generated completions (the pool's last checkpoint at or below TRL's count):\n"
                   + table_generated)
        click.echo(json.dumps(summary, indent=2))
    else:
        for s in sides:
            click.echo(f"{s.name}: " + ", ".join(f"step {p.step} ({p.samples} generated, {p.trained} trained): "
                                                 f"held-out {p.heldout:.3f}, train {p.train:.3f}, "
                                                 f"{p.heldout_tokens:.1f} tokens ({p.heldout_at_cap:.0%} at cap) "
                                                 f"@ {p.wall_s:.1f}s" for p in s.points))
    (out / "pool-vs-trl.json").write_text(json.dumps(report, indent=2, default=str))
    click.echo(f"wrote {out / 'pool-vs-trl.json'}")


if __name__ == "__main__":
    main()
