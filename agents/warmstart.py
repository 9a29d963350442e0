"""The warm start: supervised training of the tiny model into a policy GRPO can improve.

RL needs a policy that sometimes succeeds (a random model never does: every group would have zero
advantage). `warm_start` trains on `prompt answer<eos>` pairs whose answer is right only some of the
time (a habit to unlearn) plus clean "knowledge" examples in other phrasings; `warm_start_cached`
builds the pool trainer's `tiny-warm` model once per `WarmStartRecipe`. Why these recipes: the
learning experiment's docstring (`intellect.agents.demo.learn`) and docs/benchmarks-grpo.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

import torch

from intellect.agents.models import TinyModelSpec, build_cached, cache_dir, tiny_model_dir
from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.submission import prompt_text
from intellect.verifier.tasks import Task, TaskSet

log = logging.getLogger(__name__)

__all__ = ["WarmStartRecipe", "answer_text", "warm_start", "warm_start_cached"]


def _first_number(text: str) -> str:
    match = re.search(r"\d+", text)
    if match is None:
        raise ValueError(f"no number in prompt {text!r}")
    return match.group(0)


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
            value = _noisy_answer(task, rng, correct, noise, max_offset)
            p = encoded_prompts[(task.id, rng.choice(targets))]
            c = tok(answer_text(str(value)), add_special_tokens=False)["input_ids"] + [eos]
            seqs.append(p + c)
            masks.append([0] * len(p) + [1] * len(c))
        ids, attn, labels = _padded(seqs, masks, tok.pad_token_id)
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


def _noisy_answer(task: Task, rng: random.Random, correct: float, noise: str, max_offset: int) -> int:
    """The answer a warm-start example teaches: the right one with probability `correct`, else a wrong one."""
    value = int(task.answer)  # type: ignore[arg-type]
    if rng.random() >= correct:
        if noise == "copy":  # the habit of repeating the first number of the question
            value = int(_first_number(task.prompt))
        else:  # a uniform window: (1-correct)/(2·max_offset) on each of value ± 1..max_offset
            off = rng.randint(1, max_offset) * rng.choice((-1, 1))
            value = value + off if value + off >= 0 else value + abs(off)
    return value


def _padded(seqs: list[list[int]], masks: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor,
                                                                                 torch.Tensor]:
    """Right-padded input ids, attention mask and labels (-100 where the mask is 0) of a batch."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    attn = torch.zeros((len(seqs), width), dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (s, m) in enumerate(zip(seqs, masks, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        attn[i, : len(s)] = 1
        labels[i, : len(s)] = torch.where(torch.tensor(m) > 0, torch.tensor(s), torch.tensor(-100))
    return ids, attn, labels


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
        body = json.dumps({"recipe": asdict(self), "tiny": TinyModelSpec().key()}, sort_keys=True)
        return hashlib.sha256(body.encode()).hexdigest()[:16]


def warm_start_cached(recipe: WarmStartRecipe | None = None, root: Path | None = None) -> Path:
    """The tiny model warm-started by `recipe`, built once and cached under
    `cache_dir()/models/tiny-warm-<key>` (atomically: built in a temp dir, then renamed)."""
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
