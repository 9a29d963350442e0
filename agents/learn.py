"""Show that GRPO learns: a single-process asynchronous loop on CPU (no chain, no network).

Usage:
    python -m intellect.agents.learn --run-dir runs/learn                     # the demo (400 steps)
    python -m intellect.agents.learn --run-dir runs/a0 --async-level 0 --eval-every 0   # idle fraction

Two threads share the process, as an inference worker and the trainer would share a pool:

    inference thread: newest checkpoint → engine.load (hot swap) → sample `prompts_per_step`
        problems × `group_size` completions with TOPLOC proofs → rewards (verifier) → group
        advantages → a rollout file (Parquet, intellect.rollouts/v1) → queue
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
import re
import shutil
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch

from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.grpo import group_advantages
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample, latest_checkpoint
from intellect.agents.rollouts import RolloutFile, RolloutMeta, RolloutRow
from intellect.agents.tasks import synthetic_task_set
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
    "prompt_text",
    "run_async_loop",
    "warm_start",
    "warm_start_cached",
]

RUN_MARKER = ".intellect-learn-run"
LOCAL_WORKER = "0x" + hashlib.sha256(b"intellect.agents.learn/local-worker").hexdigest()[:40]


def _first_number(text: str) -> str:
    match = re.search(r"\d+", text)
    if match is None:
        raise ValueError(f"no number in prompt {text!r}")
    return match.group(0)


def prompt_text(task: Task, target_len: int | None = None) -> str:
    """The prompt the model sees: the task text (+ the thinking-budget suffix if any)."""
    if target_len is None:
        return task.prompt
    from intellect.verifier.rewards import thinking_budget_suffix

    return task.prompt + thinking_budget_suffix(target_len)


def answer_text(answer: str) -> str:
    """The completion format the warm start teaches: a space and the answer (then EOS)."""
    return f" {answer}"


# ------------------------------------------------------------------------------------------
# warm start (supervised, noisy)


def warm_start(
    model_dir: Path,
    out_dir: Path,
    tasks: TaskSet,
    *,
    steps: int = 600,
    batch_size: int = 64,
    lr: float = 3e-3,
    correct: float = 0.25,
    max_offset: int = 5,
    noise: Literal["offset", "copy"] = "offset",
    knowledge: Sequence[tuple[str, str]] = (),
    knowledge_fraction: float = 0.5,
    seed: int = 0,
    target_lengths: Sequence[int] = (),
) -> Path:
    """Supervised training on `prompt answer<eos>` where the answer is right with prob `correct`.

    Wrong answers are, with `noise="offset"`, the right one ± 1..max_offset (kept ≥ 0), so the
    model must still learn the arithmetic to place its guesses; with `noise="copy"`, the first
    number of the question (a habit to unlearn: one behaviour shared by all problems). Either
    way the result is a policy whose temperature-1 solve rate is about `correct`.

    `knowledge`: clean (prompt, answer) pairs in another format (e.g. `"3 + 4 ="`, `"7"`), mixed
    in at `knowledge_fraction` of the examples: what the model "knows" from pretraining, which
    the question format does not yet use reliably. Saves an HF model dir to `out_dir`.

    `target_lengths`: question prompts get the thinking-budget suffix of a target drawn from these
    (as a pool's workers prompt them, `prompt_text(task, target)`); none if empty.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    rng = random.Random(seed)
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    sched: torch.optim.lr_scheduler.LRScheduler
    if steps >= 20:  # one cycle: warm-up over 10%, then cosine annealing
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    else:  # OneCycleLR divides by zero on very short schedules
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda _i: 1.0)
    pool = [t for t in tasks if t.answer is not None]
    targets: list[int | None] = list(target_lengths) or [None]
    encoded_prompts = {(t.id, tl): tok(prompt_text(t, tl), add_special_tokens=False)["input_ids"]
                       for t in pool for tl in targets}
    eos = tok.eos_token_id
    t0 = time.perf_counter()
    for step in range(steps):
        batch = [rng.choice(pool) for _ in range(batch_size)]
        seqs, masks = [], []
        for task in batch:
            if knowledge and rng.random() < knowledge_fraction:
                k_prompt, k_answer = rng.choice(knowledge)
                p = tok(k_prompt, add_special_tokens=False)["input_ids"]
                c = tok(answer_text(k_answer), add_special_tokens=False)["input_ids"] + [eos]
                seqs.append(p + c)
                masks.append([0] * len(p) + [1] * len(c))
                continue
            value = int(task.answer)  # type: ignore[arg-type]
            if rng.random() >= correct:
                if noise == "copy":  # the habit of repeating the first number of the question
                    value = int(_first_number(task.prompt))
                else:  # a uniform window: (1-correct)/(2·max_offset) on each of value ± 1..max_offset
                    off = rng.randint(1, max_offset) * rng.choice((-1, 1))
                    value = value + off if value + off >= 0 else value + abs(off)
            p = encoded_prompts[(task.id, rng.choice(targets))]
            c = tok(answer_text(str(value)), add_special_tokens=False)["input_ids"] + [eos]
            seqs.append(p + c)
            masks.append([0] * len(p) + [1] * len(c))
        width = max(len(s) for s in seqs)
        ids = torch.full((batch_size, width), tok.pad_token_id, dtype=torch.long)
        attn = torch.zeros((batch_size, width), dtype=torch.long)
        labels = torch.full((batch_size, width), -100, dtype=torch.long)
        for i, (s, m) in enumerate(zip(seqs, masks, strict=True)):
            ids[i, : len(s)] = torch.tensor(s)
            attn[i, : len(s)] = 1
            labels[i, : len(s)] = torch.where(torch.tensor(m) > 0, torch.tensor(s), torch.tensor(-100))
        loss = model(input_ids=ids, attention_mask=attn, labels=labels).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 100 == 0 or step == steps - 1:
            log.info("warm start %d/%d loss %.3f (%.1fs)", step + 1, steps, loss.item(), time.perf_counter() - t0)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tok.save_pretrained(out_dir)
    return out_dir


@dataclass(frozen=True)
class WarmStartRecipe:
    """Everything a cached warm start depends on (its cache key): the tiny model, the pool's
    synthetic task set (`synthetic:N:SEED`, a + b with operands 0..20) and the training recipe."""

    tasks: int = 64
    task_seed: int = 0
    max_operand: int = 20
    target_lengths: tuple[int, ...] = ()
    """thinking budgets whose suffixes the question prompts carry (the pool's budgets)"""
    steps: int = 600
    batch_size: int = 64
    lr: float = 3e-3
    correct: float = 0.2
    noise: Literal["offset", "copy"] = "copy"
    knowledge: bool = True
    seed: int = 0
    version: int = 1
    """bump when `warm_start` changes in a way that changes its output"""

    def key(self) -> str:
        from intellect.agents.models import TinyModelSpec

        body = json.dumps({"recipe": asdict(self), "tiny": TinyModelSpec().key()}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def warm_start_cached(recipe: WarmStartRecipe | None = None, root: Path | None = None) -> Path:
    """The tiny model warm-started by `recipe`, built once and cached under
    `cache_dir()/models/tiny-warm-<key>` (atomically: built in a temp dir, then renamed)."""
    from intellect.agents.models import build_cached, cache_dir, tiny_model_dir

    recipe = recipe or WarmStartRecipe()
    root = root or cache_dir() / "models"
    final = root / f"tiny-warm-{recipe.key()}"

    def build(tmp: Path) -> None:
        tasks = synthetic_task_set(recipe.tasks, seed=recipe.task_seed, max_operand=recipe.max_operand, ops=("+",),
                                   name=f"synthetic:{recipe.tasks}:{recipe.task_seed}")
        knowledge = [(f"{a} + {b} =", str(a + b)) for a in range(recipe.max_operand + 1)
                     for b in range(recipe.max_operand + 1)] if recipe.knowledge else []
        torch.set_num_threads(1)  # more intra-op threads spin on a shared machine (docs/grpo.md)
        warm_start(tiny_model_dir(), tmp, tasks, steps=recipe.steps, batch_size=recipe.batch_size, lr=recipe.lr,
                   correct=recipe.correct, noise=recipe.noise, knowledge=knowledge, seed=recipe.seed,
                   target_lengths=recipe.target_lengths)
        (tmp / "warm_start_recipe.json").write_text(json.dumps(asdict(recipe), sort_keys=True))

    t0 = time.perf_counter()
    if build_cached(final, build, prefix=".tiny-warm-"):
        log.info("warm start cached at %s (%.0f s)", final, time.perf_counter() - t0)
    return final


# ------------------------------------------------------------------------------------------
# scoring, rollouts, evaluation


def _score(task: Task, text: str, n_tokens: int, target_len: int | None, alpha: float) -> tuple[float, float]:
    from intellect.verifier.rewards import reward, task_reward

    if target_len is None:
        return float(task_reward(task, text)), 0.0
    rb = reward(task, text, target_len, n_tokens, alpha)
    return rb.task_reward, rb.length_penalty


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
    """Generate `group_size` completions per problem, score them, compute advantages."""
    rng = random.Random(seed)
    targets = [rng.choice(list(target_lengths)) if target_lengths else None for _ in problems]
    prompts = [prompt_text(t, tl) for t, tl in zip(problems, targets, strict=True) for _ in range(group_size)]
    gens = engine.generate(prompts, params.model_copy(update={"seed": seed}))
    rows: list[RolloutRow] = []
    for g_idx, (task, tl) in enumerate(zip(problems, targets, strict=True)):
        group = gens[g_idx * group_size : (g_idx + 1) * group_size]
        scored = [_score(task, g.text, len(g.completion_ids), tl, length_alpha) for g in group]
        totals = torch.tensor([[tr - lp for tr, lp in scored]])  # (1, n)
        adv = group_advantages(totals)[0].tolist()
        for g, (tr, lp), a in zip(group, scored, adv, strict=True):
            rows.append(RolloutRow(
                problem_id=task.id, prompt_ids=g.prompt_ids, completion_ids=g.completion_ids,
                reward=tr - lp, task_reward=tr, length_penalty=lp, target_length=tl, advantage=a,
                policy_step=policy_step, proofs=g.proofs, worker=worker,
            ))
    meta = RolloutMeta(task_id=task_id, seed=f"{seed:x}", model=str(engine.checkpoint_dir), worker=worker,
                       policy_step=policy_step, group_size=group_size, length_alpha=length_alpha)
    return RolloutFile(meta, rows, name=task_id)


def evaluate(engine: TransformersEngine, tasks: Sequence[Task], params: SamplingParams, samples: int = 4) -> float:
    """Mean task reward over `samples` completions of each task (the policy's expected solve rate)."""
    prompts = [prompt_text(t) for t in tasks for _ in range(samples)]
    gens = engine.generate(prompts, params)
    scores = [_score(t, g.text, len(g.completion_ids), None, 0.0)[0]
              for t, g in zip([t for t in tasks for _ in range(samples)], gens, strict=True)]
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
    from intellect.agents.models import TinyModelSpec, tiny_model_dir

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
    (cfg.run_dir / RUN_MARKER).write_text("intellect.agents.learn run directory (wiped by the next run)\n")
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

    def inference() -> None:
        torch.set_num_threads(cfg.threads_per_side)
        try:
            for b in range(cfg.steps):
                while not stop.is_set():  # wait until policy step >= b - async_level exists
                    latest = latest_checkpoint(ckpt_dir)
                    if latest is not None and int(latest.name.split("-")[1]) >= b - cfg.async_level:
                        break
                    time.sleep(0.005)
                if stop.is_set():
                    return
                if latest != gen_engine.checkpoint_dir:
                    gen_engine.load(latest)  # hot swap
                problems = problems_rng.sample(train_list, cfg.prompts_per_step)
                rf = make_rollouts(
                    gen_engine, problems, params, cfg.group_size, policy_step=gen_engine.policy_step or 0,
                    task_id=f"local-{b}", seed=cfg.seed * 100003 + b, target_lengths=cfg.target_lengths,
                    length_alpha=cfg.length_alpha,
                )
                out_q.put(rf.write(rollouts_dir / f"batch-{b}.parquet"))
        except BaseException as exc:  # surfaced in the trainer thread
            out_q.put(exc)

    worker = threading.Thread(target=inference, name="inference", daemon=True)
    worker.start()
    busy = idle = 0.0
    train_tokens = 0
    train_rewards: list[float] = []
    stats_log: list[dict[str, Any]] = []
    try:
        for t in range(cfg.steps):
            t0 = time.perf_counter()
            item = out_q.get()
            idle += time.perf_counter() - t0
            if isinstance(item, BaseException):
                raise RuntimeError("inference thread failed") from item
            t1 = time.perf_counter()
            rf = RolloutFile.read(item)
            stats = trainer.train_step([Sample.from_row(r) for r in rf])
            busy += time.perf_counter() - t1
            train_tokens += stats.tokens
            train_rewards.append(stats.reward_mean)
            stats_log.append({**asdict(stats), "policy_step": rf.meta.policy_step})
            if cfg.eval_every and (t + 1) % cfg.eval_every == 0 and t + 1 < cfg.steps:
                curve.append((t + 1, run_eval(t + 1)))
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
