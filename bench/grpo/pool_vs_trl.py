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
    `intellect.rollouts/v1` Parquet file; the trainer thread reads and validates it (`RolloutFile.read`), trains
    one step with `intellect.agents.grpo_trainer.GRPOTrainer` (staleness check, zero-advantage filter, old
    log-probs recomputed, `optimizer_steps` updates), writes the checkpoint (safetensors + optimizer state) and
    the inference thread hot-swaps to it; rollouts run up to `async_level` steps ahead (the pool's default 2).
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

Differences left (documented, not hidden): the pool drops zero-advantage groups before the loss (TRL keeps them,
so its per-token denominator counts them; the gradient's direction is the same, its size differs when many groups
are flat); the pool samples with its own engine (same temperature, no top-k/top-p on either side); TRL samples its
problems in shuffled epochs (every problem once per epoch), the pool draws `prompts_per_step` distinct problems at
random every step (both seeded); the pool's rollouts may be up to `async_level` policy steps stale.

Evaluation, outside both timed regions: every `eval_every` rollout steps each side's checkpoint is kept and,
after both trainings, scored on the held-out problems (and on the training problems, which RL optimises directly):
pass@1 at temperature 0 (one greedy completion per problem through `TransformersEngine`, graded by `task_reward`). Samples = completions generated and trained on
(rollout steps × prompts_per_step × group_size), equal on both sides at each row. Wall-clock = seconds since the
side started (model load included, evaluation and the bench's own checkpoint copies excluded). The wall-clock tax
is pool time / TRL time to the same accuracy (the highest both reach), and at equal samples; the CPU seconds of
each side are printed too (steadier than wall-clock on a machine shared with other jobs).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import random
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import click

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

    def __post_init__(self) -> None:
        for name in ("steps", "prompts_per_step", "group_size", "optimizer_steps", "eval_every", "max_new_tokens",
                     "heldout_tasks", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.group_size < 2:
            raise ValueError("group_size must be >= 2 (a GRPO group needs two completions)")
        if self.samples_per_step % self.optimizer_steps:
            raise ValueError(f"prompts_per_step × group_size = {self.samples_per_step} is not divisible by "
                             f"optimizer_steps = {self.optimizer_steps} (TRL's per-device batch)")

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


def verifier_reward(tasks: Any) -> Callable[..., list[float]]:
    """A TRL reward function (`reward_funcs=[...]`) that scores with the verifier's `task_reward`, as the pool's
    workers and validators do. The dataset must carry a `task_id` column: TRL passes it as a keyword (one id per
    completion) and the task is looked up in `tasks` (a `TaskSet` or any mapping id → `Task`)."""
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
        return out

    return verifier_task_reward


# ------------------------------------------------------------------------------------------
# curves and the table (pure)


@dataclass
class Point:
    """One evaluated checkpoint of one side."""

    step: int
    samples: int
    wall_s: float
    heldout: float | None = None
    train: float | None = None
    """pass@1 (T=0) on the training problems: what RL optimised directly"""
    checkpoint: str | None = None


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
    out: dict[str, Any] = {"wall_pool_s": pool.wall_s, "wall_trl_s": trl.wall_s,
                           "tax_equal_samples": pool.wall_s / trl.wall_s if trl.wall_s > 0 else None,
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


def build_table(pool: SideResult, trl: SideResult) -> str:
    """Markdown: one row per evaluated step (equal samples on both sides)."""
    rows = ["| step | samples | pool held-out | TRL held-out | pool train | TRL train | pool wall s | TRL wall s "
            "| wall pool/TRL |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    trl_by_step = {p.step: p for p in trl.points}
    for p in pool.points:
        q = trl_by_step.get(p.step)
        ratio = p.wall_s / q.wall_s if q is not None and q.wall_s > 0 and p.step > 0 else None
        rows.append(f"| {p.step} | {p.samples} | {_fmt(p.heldout, '.3f')} | {_fmt(q.heldout if q else None, '.3f')} "
                    f"| {_fmt(p.train, '.3f')} | {_fmt(q.train if q else None, '.3f')} "
                    f"| {_fmt(p.wall_s if p.step else None, '.1f')} | {_fmt(q.wall_s if q and q.step else None, '.1f')} "
                    f"| {_fmt(ratio, '.2f')} |")
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


def _tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return tok if getattr(tok, "chat_template", None) else None


# ------------------------------------------------------------------------------------------
# (a) the pool path


def make_rollouts(engine: Any, problems: Sequence[Any], params: Any, group_size: int, tokenizer: Any, *,
                  policy_step: int, task_id: str, seed: int) -> Any:
    """`group_size` completions of each problem (one batched call, base seed `seed`), scored and given group
    advantages by the workers' rollout builder (`rollout_rows`), as an `intellect.rollouts/v1` file. The prompts
    are `prompt_text(task, None, tokenizer)`: the chat template of an instruct model, as the pool's workers
    write them (`generate_for_claim`); the bare text for the tiny model."""
    from intellect.agents.generate import rollout_rows
    from intellect.verifier.rollouts import RolloutFile, RolloutMeta
    from intellect.verifier.submission import prompt_text

    prompts = [prompt_text(t, None, tokenizer) for t in problems for _ in range(group_size)]
    gens = engine.generate(prompts, params.model_copy(update={"seed": seed}))
    rows = []
    for g, task in enumerate(problems):
        rows += rollout_rows(task, None, gens[g * group_size:(g + 1) * group_size], length_alpha=0.0,
                             policy_step=policy_step, worker=BENCH_WORKER)
    meta = RolloutMeta(task_id=task_id, seed=f"{seed:x}", model=str(engine.checkpoint_dir), worker=BENCH_WORKER,
                       policy_step=policy_step, group_size=group_size, length_alpha=0.0)
    return RolloutFile(meta, rows, name=task_id)


def _keep(src: Path, dst: Path) -> None:
    """Keep a checkpoint for the evaluation (hard links: no copy, survives the trainer's pruning)."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link)


def train_pool(cfg: BenchConfig, model_dir: Path, train: Any, out: Path) -> SideResult:
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.grpo_trainer import (
        GRPOConfig,
        GRPOTrainer,
        NoSignalError,
        Sample,
        latest_checkpoint,
    )
    from intellect.verifier.rollouts import RolloutFile

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
        async_level=cfg.async_level, seed=cfg.seed, keep_checkpoints=cfg.async_level + 3))
    trainer.save_checkpoint()
    tokenizer = _tokenizer(model_dir)
    params = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature, capture_proofs=cfg.proofs)
    eval_at = set(cfg.eval_steps())
    points = [Point(0, 0, 0.0, checkpoint=str(model_dir))]
    gen_engine = TransformersEngine()
    out_q: queue.Queue[Path | BaseException] = queue.Queue()
    stop = threading.Event()
    consumed = [0]
    problems_rng = random.Random(cfg.seed + 2)
    train_list = list(train)
    max_batches = cfg.steps * 20

    def inference() -> None:
        torch.set_num_threads(1)
        try:
            for b in range(max_batches):
                while not stop.is_set() and b - consumed[0] > cfg.async_level:
                    time.sleep(0.002)
                if stop.is_set():
                    return
                latest = latest_checkpoint(ckpt_dir)
                if latest is not None and latest != gen_engine.checkpoint_dir:
                    gen_engine.load(latest)  # hot swap
                problems = problems_rng.sample(train_list, cfg.prompts_per_step)
                rf = make_rollouts(gen_engine, problems, params, cfg.group_size, tokenizer,
                                   policy_step=gen_engine.policy_step or 0, task_id=f"bench-{b}",
                                   seed=cfg.seed * 100003 + b)
                out_q.put(rf.write(rollouts_dir / f"batch-{b}.parquet"))
        except BaseException as exc:  # surfaced in the trainer thread
            out_q.put(exc)

    worker = threading.Thread(target=inference, name="pool-inference", daemon=True)
    worker.start()
    rewards: list[float] = []
    flat = 0
    try:
        rounds = 0  # rollout steps consumed (each = samples_per_step completions generated and given to the trainer)
        while rounds < cfg.steps:
            item = out_q.get()
            if isinstance(item, BaseException):
                raise RuntimeError("pool inference thread failed") from item
            rf = RolloutFile.read(item)
            rewards.append(sum(r.task_reward for r in rf) / max(len(rf), 1))
            try:
                trainer.train_step([Sample.from_row(r) for r in rf])
            except NoSignalError as exc:  # all groups flat: no step (TRL would take a zero-gradient step)
                log.info("pool: %s", exc)
                flat += 1
            consumed[0] += 1
            rounds += 1
            if rounds in eval_at:
                wall = time.perf_counter() - t_start - excluded
                t0 = time.perf_counter()
                dst = evals / f"round-{rounds}"
                _keep(trainer.checkpoint_path(), dst)
                excluded += time.perf_counter() - t0
                points.append(Point(rounds, rounds * cfg.samples_per_step, wall, checkpoint=str(dst)))
    finally:
        stop.set()
        worker.join(timeout=60)
    wall = time.perf_counter() - t_start - excluded
    cpu = time.process_time() - cpu_start
    gen_s = float(gen_engine.stats["generate_seconds"])
    return SideResult("pool", points, wall, rewards, load_before, _load(), cpu,
                      {"flat_batches": flat, "trainer_steps": trainer.step, "generate_s": gen_s,
                       "proofs": cfg.proofs, "async_level": cfg.async_level})


# ------------------------------------------------------------------------------------------
# (b) TRL


def trl_available() -> bool:
    try:
        import trl  # noqa: F401
    except ImportError:
        return False
    return True


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
    ds = Dataset.from_list([{"prompt": prompt_text(t, None, chat_tok), "task_id": t.id} for t in train])
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    eval_every_updates = cfg.eval_every * cfg.optimizer_steps
    points = [Point(0, 0, 0.0, checkpoint=str(model_dir))]
    rewards: list[float] = []

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
            points.append(Point(rounds, rounds * cfg.samples_per_step, wall, checkpoint=str(dst)))

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                rewards.append(float(logs["reward"]))

    args = GRPOConfig(output_dir=str(out / "trl-out"), **cfg.trl_args())
    trainer = GRPOTrainer(model=model, reward_funcs=[verifier_reward(train)], args=args, train_dataset=ds,
                          processing_class=tok, callbacks=[Keep()])
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # one dict per log step on stdout otherwise (rewards kept by Keep)
    trainer.train()
    wall = time.perf_counter() - t_start - excluded[0]
    cpu = time.process_time() - cpu_start
    import trl

    return SideResult("trl", points, wall, rewards, load_before, _load(), cpu, {"trl": trl.__version__})


# ------------------------------------------------------------------------------------------
# evaluation


def evaluate_points(sides: Sequence[SideResult], heldout: Any, train: Any, cfg: BenchConfig, model_dir: Path) -> None:
    """pass@1 at temperature 0 on the held-out problems (and the training ones) for every kept checkpoint."""
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.verifier.rewards import task_reward
    from intellect.verifier.submission import prompt_text

    torch.set_num_threads(cfg.threads)
    engine = TransformersEngine()
    greedy = SamplingParams(max_tokens=cfg.max_new_tokens, temperature=0.0, seed=0, capture_proofs=False)
    tokenizer = _tokenizer(model_dir)

    def pass_at_1(tasks: list[Any]) -> float:
        gens = engine.generate([prompt_text(t, None, tokenizer) for t in tasks], greedy)
        return sum(float(task_reward(t, g.text)) for t, g in zip(tasks, gens, strict=True)) / len(tasks)

    cache: dict[str, tuple[float, float]] = {}
    for side in sides:
        for p in side.points:
            key = str(p.checkpoint)
            if key not in cache:
                engine.load(Path(key))
                cache[key] = (pass_at_1(list(heldout)), pass_at_1(list(train)))
                log.info("%s step %d: pass@1 (T=0) held-out %.3f, train %.3f", side.name, p.step, *cache[key])
            p.heldout, p.train = cache[key]


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
@click.option("--only", type=click.Choice(["both", "pool", "trl"]), default="both", show_default=True)
@click.option("--dry-run", is_flag=True, help="print the resolved settings (and TRL's GRPOConfig arguments) and stop")
def main(out: Path, only: str, dry_run: bool, **settings: Any) -> None:
    cfg = BenchConfig(**settings)
    if dry_run:
        click.echo(json.dumps({"config": asdict(cfg), "eval_steps": cfg.eval_steps(), "trl_args": cfg.trl_args(),
                               "trl_available": trl_available()}, indent=2))
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
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
    click.echo(f"model {model_dir} ({prepare_s:.0f} s to prepare, not counted); {len(train)} training problems, "
               f"{len(heldout)} held-out; load {_load()}")
    sides: list[SideResult] = []
    if only in ("both", "pool"):
        sides.append(train_pool(cfg, model_dir, train, out / "pool"))
        click.echo(f"pool: {cfg.steps} rollout steps in {sides[-1].wall_s:.1f} s, {sides[-1].cpu_s:.1f} CPU s "
                   f"(load {sides[-1].load_after})")
    if only in ("both", "trl"):
        sides.append(train_trl(cfg, model_dir, train, out / "trl"))
        click.echo(f"trl: {cfg.steps} rollout steps in {sides[-1].wall_s:.1f} s, {sides[-1].cpu_s:.1f} CPU s "
                   f"(load {sides[-1].load_after})")
    evaluate_points(sides, heldout, train, cfg, model_dir)
    report: dict[str, Any] = {"config": asdict(cfg), "model_dir": str(model_dir), "load_end": _load(),
                              "sides": [asdict(s) for s in sides]}
    if len(sides) == 2:
        pool, trl_side = sides
        table = build_table(pool, trl_side)
        summary = summarize(pool, trl_side)
        report["summary"], report["table"] = summary, table
        click.echo(table)
        click.echo(json.dumps(summary, indent=2))
    else:
        for s in sides:
            click.echo(f"{s.name}: " + ", ".join(f"{p.samples}: {p.heldout:.3f} @ {p.wall_s:.1f}s" for p in s.points))
    (out / "pool-vs-trl.json").write_text(json.dumps(report, indent=2, default=str))
    click.echo(f"wrote {out / 'pool-vs-trl.json'}")


if __name__ == "__main__":
    main()
