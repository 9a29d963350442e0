"""Show that GRPO learns: a single-process asynchronous loop on CPU (no chain, no network).

Usage:
    python -m intellect.agents.demo.learn --run-dir runs/learn                     # the demo (400 steps)
    python -m intellect.agents.demo.learn --run-dir runs/a0 --async-level 0 --eval-every 0   # idle fraction

Two threads share the process, as an inference worker and the trainer would share a pool:

    inference thread: newest checkpoint → engine.load (hot swap) → sample `prompts_per_step`
        problems × `group_size` completions with TOPLOC proofs → rewards (verifier) → group
        advantages → a rollout file (intellect.rollouts/v2) → queue
    trainer (main thread): rollout file → RolloutFile.read (validated) → GRPOTrainer.train_step
        (refuses staleness > async_level) → <run>/checkpoints/step-<t+1>

Batch b may be generated once checkpoint step ≥ b − async_level exists, so the trainer at step t
always gets rollouts of policy ≥ t − async_level; with async_level 0 the two sides alternate,
with 2 inference runs up to two steps ahead and its time hides behind training.

The model: a tiny Llama (hidden 128, 2 layers, tokenizer trained locally), first *warm-started*
by supervised training on two kinds of examples:
- "knowledge": the clean addition table over the whole operand range (what pretraining would give
  a model) in four phrasings, `a + b =`, `a + b equals`, `Calculate a + b:` and `The sum of a
  and b is` → ` c`, three quarters of the examples;
- "questions": `What is a + b?` → ` c` on the *training* problems only, but right only 20% of
  the time; otherwise the answer copies the question's first number (a habit to unlearn).
RL needs a policy that sometimes succeeds (a random model never does: all groups would have zero
advantage). This one solves ~10-20% of held-out questions at temperature 1 and knows the
arithmetic in other phrasings; GRPO, rewarded by the verifier on training questions only, has to
make the question format use it — a behaviour shared by all problems, so the gain shows on
held-out questions the model never saw in question format (in the warm start or in RL).
Why four phrasings: with the single `a + b =` format the question format learnt its own,
imprecise sums in one seed of two (held-out answers within ±2 of the right one, reward stalled
at 0.23); an arithmetic the model uses from several phrasings is one the question format can
reuse. Why 3600 steps at 75% knowledge: the transfer only works if the table is solid (with 85-96%
of `a + b =` right, held-out stalled at 0.54-0.58; with 100%, 0.82-0.95), and 2400 steps at 50%
left two seeds of four short of it. With these defaults, quiet runs of seeds 0, 1, 2 went
0.17-0.21 -> 0.93-0.98 held-out, each in 498-528 s on 2 cores (docs/benchmarks-grpo.md). Why not
plain noisy answers (± 1..2 around the right one, `noise="offset"`): tried, the held-out reward
crept from 0.20 to 0.25 in 60 steps — sharpening a per-problem window transfers poorly at this
size. Why not SmolLM2-135M: one GRPO step of 16 × 128 tokens costs ~15 s on 2 idle cores, so 15
minutes would give ~50 steps at best on a machine shared by five.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import random
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.generate import rollout_rows
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, NoSignalError, Sample, latest_checkpoint
from intellect.agents.models import TinyModelSpec, tiny_model_dir
from intellect.agents.tasks import synthetic_task_set
from intellect.agents.warmstart import WarmStartRecipe, answer_text, warm_start, warm_start_cached
from intellect.verifier.rewards import task_reward
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow
from intellect.verifier.submission import prompt_text
from intellect.verifier.tasks import Task, TaskSet

log = logging.getLogger(__name__)

__all__ = [
    "LearnConfig",
    "LearnResult",
    "WarmStartRecipe",
    "answer_text",
    "equation_accuracy",
    "evaluate",
    "make_rollouts",
    "run_async_loop",
    "warm_start",
    "warm_start_cached",
]

RUN_MARKER = ".intellect-learn-run"
LOCAL_WORKER = "0x" + hashlib.sha256(b"intellect.agents.learn/local-worker").hexdigest()[:40]


# ------------------------------------------------------------------------------------------
# scoring, rollouts, evaluation


def make_rollouts(
    engine: TransformersEngine,
    problems: Sequence[Task],
    params: SamplingParams,
    group_size: int,
    *,
    policy_step: int,
    task_id: str,
    seed: int,
    target_lengths: Sequence[int] = (),
    length_alpha: float = 0.0,
    worker: str = LOCAL_WORKER,
) -> RolloutFile:
    """Generate `group_size` completions per problem (one batched call, base seed `seed`), score them and
    compute advantages with the agents' rollout builder (`intellect.agents.generate.rollout_rows`)."""
    rng = random.Random(seed)
    targets = [rng.choice(list(target_lengths)) if target_lengths else None for _ in problems]
    prompts = [prompt_text(t, tl) for t, tl in zip(problems, targets, strict=True) for _ in range(group_size)]
    gens = engine.generate(prompts, params.model_copy(update={"seed": seed}))
    rows: list[RolloutRow] = []
    for g_idx, (task, tl) in enumerate(zip(problems, targets, strict=True)):
        group = gens[g_idx * group_size : (g_idx + 1) * group_size]
        rows += rollout_rows(task, tl, group, length_alpha=length_alpha, policy_step=policy_step, worker=worker)
    meta = RolloutMeta(task_id=task_id, seed=f"{seed:x}", model=str(engine.checkpoint_dir), worker=worker,
                       policy_step=policy_step, group_size=group_size, length_alpha=length_alpha)
    return RolloutFile(meta, rows, name=task_id)


def evaluate(engine: TransformersEngine, tasks: Sequence[Task], params: SamplingParams, samples: int = 4) -> float:
    """Mean task reward over `samples` completions of each task (the policy's expected solve rate)."""
    prompts = [prompt_text(t) for t in tasks for _ in range(samples)]
    gens = engine.generate(prompts, params)
    scores = [float(task_reward(t, g.text)) for t, g in zip([t for t in tasks for _ in range(samples)], gens, strict=True)]
    return sum(scores) / len(scores)


# ------------------------------------------------------------------------------------------
# the loop


@dataclass
class LearnConfig:
    """Everything a learning run depends on (recorded next to its results)."""

    run_dir: Path = Path("runs/learn")
    model_dir: Path | None = None
    """an HF causal LM dir to start from (default: the tiny model, warm-started)"""
    steps: int = 400
    prompts_per_step: int = 16
    """distinct problems per step: 16 × 8 beat 8 × 16 at the same 128 samples (held-out 0.68 vs 0.57
    after 300 steps, same warm start): the gradient covers more of the problem set per step"""
    group_size: int = 8
    """8 completions still leave few flat groups at solve rates 0.1-0.9 (INTELLECT-2 used 16)"""
    max_tokens: int = 8
    temperature: float = 1.0
    async_level: int = 2
    lr: float = 3e-4
    """7e-4 learnt faster at first but plateaued lower (0.46 at 100 steps vs 0.56); 2e-4 slower (docs/benchmarks-grpo.md)"""
    optimizer_steps: int = 2
    max_grad_norm: float = 0.1
    seed: int = 0
    train_tasks: int = 320
    """of the 441 problems `a + b` with a, b in 0..20; the other 121 hold the held-out set"""
    heldout_tasks: int = 100
    eval_samples: int = 8
    eval_every: int = 25
    """evaluate the held-out set every k steps (0: only before and after)"""
    max_operand: int = 20
    ops: tuple[str, ...] = ("+",)
    warm_start_steps: int = 3600
    """the transfer needs the whole table right: 2400 steps at knowledge fraction 0.5 left the
    `a + b =` table 85-96% right on seeds 0 and 2 and their held-out reward stalled at 0.54-0.58;
    3600 steps at 0.75 (cost: about 1.5x, ~420 s of a ~510 s run) gave 100% on seeds 0, 1, 2"""
    warm_start_correct: float = 0.2
    warm_start_noise: Literal["offset", "copy"] = "copy"
    """wrong warm-start answers: "copy" repeats the question's first number, "offset" is ± 1..max_offset"""
    warm_start_max_offset: int = 2
    warm_start_knowledge: bool = True
    """mix clean equations `a op b = c` over all operands into the warm start (see module doc)"""
    warm_start_knowledge_fraction: float = 0.75
    """share of warm-start examples drawn from the knowledge (the rest: training questions, whose
    copy habit is easy to fit); more knowledge examples per step converge the table sooner"""
    knowledge_formats: tuple[str, ...] = ("{a} {op} {b} =", "{a} {op} {b} equals", "Calculate {a} {op} {b}:",
                                          "The {name} of {a} and {b} is")
    """phrasings of the warm start's knowledge (every pair in each; `_equations` names the fields).
    One phrasing (`a op b =`) let one seed in two learn separate, imprecise sums for the question
    format (held-out 0.04 -> 0.23); four made the arithmetic one the question format reuses
    (seed 1: 0.14 -> 0.82 in 200 steps). None is the held-out question format `What is a op b?`"""
    model_layers: int = 2
    model_hidden: int = 128
    """the tiny Llama's size (`TinyModelSpec`, intermediate = 3 x hidden); 2 x 128 keeps a 400-step
    run near 8 minutes on 2 cores, and the four phrasings made more layers unnecessary"""
    target_lengths: tuple[int, ...] = ()
    length_alpha: float = 0.0
    capture_proofs: bool = True
    threads_per_side: int = 1
    """torch intra-op threads (one per thread; 2 cores → inference 1 + trainer 1)"""


@dataclass
class LearnResult:
    config: dict[str, Any]
    heldout_before: float
    heldout_after: float
    curve: list[tuple[int, float]]
    train_rewards: list[float]
    trainer_busy_s: float
    trainer_idle_s: float
    idle_fraction: float
    gen_tokens: int
    gen_seconds: float
    gen_tokens_per_s: float
    train_tokens: int
    train_seconds: float
    train_tokens_per_s: float
    wall_s: float
    warm_start_s: float
    step_stats: list[dict[str, Any]] = field(default_factory=list)
    greedy_before: float = 0.0
    """held-out solve rate of greedy decoding (one completion per problem) before RL"""
    greedy_after: float = 0.0
    equations_before: float = 0.0
    """greedy accuracy on the whole equation table `a op b =` (the warm start's "knowledge")"""
    equations_after: float = 0.0


def _equations(cfg: LearnConfig, formats: Sequence[str] = ("{a} {op} {b} =",)) -> list[tuple[str, str]]:
    """The operation table: `a op b =` → value, for all operands in range, once per template of
    `formats` (fields `{a}`, `{b}`, `{op}` and `{name}`: sum / difference / product)."""
    fns = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    names = {"+": "sum", "-": "difference", "*": "product"}
    return [(fmt.format(a=a, op=op, b=b, name=names[op]), str(fns[op](a, b)))
            for fmt in formats
            for op in cfg.ops for a in range(cfg.max_operand + 1) for b in range(cfg.max_operand + 1)
            if op != "-" or a >= b]


def equation_accuracy(engine: TransformersEngine, cfg: LearnConfig) -> float:
    """Greedy accuracy of the loaded policy on the whole equation table (`3 + 4 =` → ` 7`)."""
    table = _equations(cfg)
    gens = engine.generate([p for p, _ in table], SamplingParams(max_tokens=cfg.max_tokens, temperature=0.0,
                                                                capture_proofs=False))
    return sum(g.text.strip() == answer for g, (_, answer) in zip(gens, table, strict=True)) / len(table)


def _base_model(cfg: LearnConfig, train: TaskSet) -> tuple[Path, float]:
    if cfg.model_dir is not None:
        return Path(cfg.model_dir), 0.0

    t0 = time.perf_counter()
    spec = TinyModelSpec(num_layers=cfg.model_layers, hidden_size=cfg.model_hidden,
                         intermediate_size=3 * cfg.model_hidden)
    knowledge = _equations(cfg, cfg.knowledge_formats) if cfg.warm_start_knowledge else []
    out = warm_start(tiny_model_dir(spec), cfg.run_dir / "warm-start", train, steps=cfg.warm_start_steps,
                     correct=cfg.warm_start_correct, max_offset=cfg.warm_start_max_offset,
                     noise=cfg.warm_start_noise, knowledge=knowledge,
                     knowledge_fraction=cfg.warm_start_knowledge_fraction, seed=cfg.seed)
    return out, time.perf_counter() - t0


def run_async_loop(cfg: LearnConfig) -> LearnResult:
    """Warm start (if no model given), then `cfg.steps` asynchronous GRPO steps."""
    torch.set_num_threads(cfg.threads_per_side)
    t_start = time.perf_counter()
    if cfg.run_dir.exists() and any(cfg.run_dir.iterdir()):
        if not (cfg.run_dir / RUN_MARKER).is_file():
            raise FileExistsError(f"{cfg.run_dir} exists and is not a learning run directory; refusing to wipe it")
        shutil.rmtree(cfg.run_dir)
    cfg.run_dir.mkdir(parents=True, exist_ok=True)
    (cfg.run_dir / RUN_MARKER).write_text("intellect.agents.demo.learn run directory (wiped by the next run)\n")
    train = synthetic_task_set(cfg.train_tasks, seed=cfg.seed, max_operand=cfg.max_operand, ops=cfg.ops,
                               name="train")
    heldout = synthetic_task_set(cfg.heldout_tasks, seed=cfg.seed + 1, max_operand=cfg.max_operand, ops=cfg.ops,
                                 exclude_prompts=[t.prompt for t in train], name="heldout")
    base, warm_s = _base_model(cfg, train)
    ckpt_dir = cfg.run_dir / "checkpoints"
    trainer = GRPOTrainer(base, ckpt_dir, GRPOConfig(
        lr=cfg.lr, optimizer_steps=cfg.optimizer_steps, max_grad_norm=cfg.max_grad_norm,
        max_completion_tokens=cfg.max_tokens, async_level=cfg.async_level, seed=cfg.seed,
    ))
    trainer.save_checkpoint()  # step-0: the policy inference starts from
    params = SamplingParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                            capture_proofs=cfg.capture_proofs)
    eval_params = SamplingParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature, seed=cfg.seed + 7,
                                 capture_proofs=False)
    eval_engine = TransformersEngine()
    heldout_list = list(heldout)

    greedy_params = eval_params.model_copy(update={"temperature": 0.0})

    def run_eval(step: int) -> float:
        eval_engine.load(trainer.checkpoint_path(step))
        score = evaluate(eval_engine, heldout_list, eval_params, cfg.eval_samples)
        log.info("held-out reward at step %d: %.3f", step, score)
        return score

    curve = [(0, run_eval(0))]
    greedy_before = evaluate(eval_engine, heldout_list, greedy_params, 1)
    equations_before = equation_accuracy(eval_engine, cfg)
    rollouts_dir = cfg.run_dir / "rollouts"
    rollouts_dir.mkdir()
    out_q: queue.Queue[Path | BaseException] = queue.Queue()
    stop = threading.Event()
    gen_engine = TransformersEngine()
    problems_rng = random.Random(cfg.seed + 2)
    train_list = list(train)

    # A batch of flat groups trains no step (NoSignalError: no checkpoint identical to the last), so batches
    # and train steps can drift apart. Inference runs at most `async_level` batches ahead of the trainer's
    # consumption: every consumed batch advances the policy by at most one step, so a batch generated with
    # policy p trains a step t <= p + async_level, the same staleness bound as before.
    consumed = [0]
    max_batches = cfg.steps * 20  # a run that finds no signal in that many batches stops with an error

    def inference() -> None:
        torch.set_num_threads(cfg.threads_per_side)
        try:
            for b in range(max_batches):
                while not stop.is_set() and b - consumed[0] > cfg.async_level:
                    time.sleep(0.005)
                if stop.is_set():
                    return
                latest = latest_checkpoint(ckpt_dir)
                if latest != gen_engine.checkpoint_dir:
                    gen_engine.load(latest)  # hot swap
                problems = problems_rng.sample(train_list, cfg.prompts_per_step)
                rf = make_rollouts(
                    gen_engine, problems, params, cfg.group_size, policy_step=gen_engine.policy_step or 0,
                    task_id=f"local-{b}", seed=cfg.seed * 100003 + b, target_lengths=cfg.target_lengths,
                    length_alpha=cfg.length_alpha,
                )
                out_q.put(rf.write(rollouts_dir / f"batch-{b}.rollouts"))
        except BaseException as exc:  # surfaced in the trainer thread
            out_q.put(exc)

    worker = threading.Thread(target=inference, name="inference", daemon=True)
    worker.start()
    busy = idle = 0.0
    train_tokens = 0
    train_rewards: list[float] = []
    stats_log: list[dict[str, Any]] = []
    try:
        t = 0  # train steps taken
        while t < cfg.steps:
            t0 = time.perf_counter()
            if consumed[0] >= max_batches:
                raise RuntimeError(f"no learning signal in {max_batches} batches (every group flat)")
            item = out_q.get()
            idle += time.perf_counter() - t0
            if isinstance(item, BaseException):
                raise RuntimeError("inference thread failed") from item
            t1 = time.perf_counter()
            rf = RolloutFile.read(item)
            try:
                stats = trainer.train_step([Sample.from_row(r) for r in rf])
            except NoSignalError as exc:  # a batch of flat groups: no step, take the next batch
                log.info("%s", exc)
                consumed[0] += 1
                continue
            consumed[0] += 1  # after the step's checkpoint is on disk: the next batch may use it
            t += 1
            busy += time.perf_counter() - t1
            train_tokens += stats.tokens
            train_rewards.append(stats.reward_mean)
            stats_log.append({**asdict(stats), "policy_step": rf.meta.policy_step})
            if cfg.eval_every and t % cfg.eval_every == 0 and t < cfg.steps:
                curve.append((t, run_eval(t)))
    finally:
        stop.set()
        worker.join(timeout=60)
    curve.append((cfg.steps, run_eval(cfg.steps)))
    greedy_after = evaluate(eval_engine, heldout_list, greedy_params, 1)
    equations_after = equation_accuracy(eval_engine, cfg)
    gen_tokens = int(gen_engine.stats["generated_tokens"])
    gen_s = float(gen_engine.stats["generate_seconds"])
    result = LearnResult(
        config={k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()},
        heldout_before=curve[0][1], heldout_after=curve[-1][1], curve=curve, train_rewards=train_rewards,
        trainer_busy_s=busy, trainer_idle_s=idle, idle_fraction=idle / max(busy + idle, 1e-9),
        gen_tokens=gen_tokens, gen_seconds=gen_s, gen_tokens_per_s=gen_tokens / max(gen_s, 1e-9),
        train_tokens=train_tokens, train_seconds=busy, train_tokens_per_s=train_tokens / max(busy, 1e-9),
        wall_s=time.perf_counter() - t_start, warm_start_s=warm_s, step_stats=stats_log,
        greedy_before=greedy_before, greedy_after=greedy_after,
        equations_before=equations_before, equations_after=equations_after,
    )
    (cfg.run_dir / "result.json").write_text(json.dumps(asdict(result), indent=2, default=str))
    return result


def plot_curve(result: LearnResult, path: Path) -> Path:
    """Held-out reward vs step and the training batches' mean reward, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = list(range(1, len(result.train_rewards) + 1))
    ax.plot(xs, result.train_rewards, color="0.7", lw=1, label="training batch mean reward")
    ax.plot([s for s, _ in result.curve], [r for _, r in result.curve], "o-", color="C0", lw=2,
            label="held-out mean reward (T=1)")
    ax.set_xlabel("GRPO step")
    ax.set_ylabel("reward (solve rate)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    ax.set_title(f"async GRPO on CPU, async_level={result.config['async_level']}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    import click

    @click.command(help="Single-process async GRPO on CPU: held-out reward before/after + a PNG curve.")
    @click.option("--run-dir", type=click.Path(path_type=Path), default=Path("runs/learn"), show_default=True,
                  help="output directory (wiped first)")
    @click.option("--model-dir", type=click.Path(path_type=Path, exists=True), default=None,
                  help="start from this HF model dir instead of the warm-started tiny model")
    @click.option("--steps", type=int, default=LearnConfig.steps, show_default=True, help="GRPO steps")
    @click.option("--async-level", type=int, default=LearnConfig.async_level, show_default=True,
                  help="max policy-step lag of rollouts")
    @click.option("--eval-every", type=int, default=LearnConfig.eval_every, show_default=True,
                  help="held-out evaluation period in steps (0: before/after only)")
    @click.option("--prompts-per-step", type=int, default=LearnConfig.prompts_per_step, show_default=True)
    @click.option("--group-size", type=int, default=LearnConfig.group_size, show_default=True)
    @click.option("--lr", type=float, default=LearnConfig.lr, show_default=True)
    @click.option("--seed", type=int, default=LearnConfig.seed, show_default=True)
    @click.option("--no-proofs", is_flag=True, help="skip TOPLOC proof capture")
    def cli(run_dir: Path, model_dir: Path | None, steps: int, async_level: int, eval_every: int,
            prompts_per_step: int, group_size: int, lr: float, seed: int, no_proofs: bool) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        cfg = LearnConfig(run_dir=run_dir, model_dir=model_dir, steps=steps, async_level=async_level,
                          eval_every=eval_every, prompts_per_step=prompts_per_step, group_size=group_size,
                          lr=lr, seed=seed, capture_proofs=not no_proofs)
        result = run_async_loop(cfg)
        png = plot_curve(result, run_dir / "curve.png")
        summary = {k: v for k, v in asdict(result).items() if k not in {"step_stats", "config"}}
        click.echo(json.dumps(summary, indent=2, default=str))
        click.echo(f"held-out reward {result.heldout_before:.3f} -> {result.heldout_after:.3f}; curve: {png}")

    cli()


if __name__ == "__main__":
    main()
