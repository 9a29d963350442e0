"""Does the pool's generation sample from the model's own distribution? Two checks on a real model.

Usage (from the repository root):
    .venv/bin/python bench/grpo/sampler_exactness.py                  # SmolLM2-135M-Instruct, 20,000 draws per mode
    .venv/bin/python bench/grpo/sampler_exactness.py --model DIR --draws 5000
    .venv/bin/python bench/grpo/sampler_exactness.py --draws 100 --run runs/X --no-surprise --solve-samples 32
                                                                      # checks 1-2 (short) and 4 on a run's problems

1. The sampler (`intellect.verifier.replay.gumbel_sample`, what `TransformersEngine` samples with and validators
   replay): fixed next-token logits of the model after a real prompt (two prompts), N draws with distinct
   completion seeds at one position and with one seed over N positions; the empirical frequencies of the 12 most
   likely tokens and of the rest against softmax(logits): Pearson chi-square on 12 degrees of freedom (26.2 is
   the 1 % critical value) and each top token's z-score.
2. The batched engine (`TransformersEngine.generate`, left-padded prompts of different lengths in one batch, KV
   cache): every sampled token's log-prob against one clean, unpadded forward pass of prompt + completion (the
   largest absolute difference), and greedy completions batched against one prompt at a time (how many agree).

3. With `--run DIR` (a `bench/grpo/pool_vs_trl.py --out DIR` run): the base-policy samples of both sides — the
   pool's rollout files of policy step 0 and TRL's first generation (`trl/samples.jsonl`, call 0) — scored by the
   base model: the mean of (the sampled token's −log p − the entropy of its distribution), which is 0 in
   expectation for a sampler that draws from the model and negative for a sharper one, with its standard error.
4. With `--run DIR --solve-samples K`: the solve rate itself, on the problems of the run's first round (the pool's
   `round-0-*` files): K fresh samples per problem from the base model by the pool's engine (TOPLOC capture on
   and off), by HF `generate` (multinomial, top-k 0, top-p 1: TRL's sampling) and, where `trl` is installed
   (`.venv-trl`), by TRL's `GRPOTrainer` itself (its tokenisation and generation methods), graded by
   `task_reward`.

Written for issue 17's pool-vs-TRL gap (docs/benchmarks-grpo.md): a lower solve rate of the pool's samples than
HF `generate`'s (0.071 vs 0.097 over 576 each, 1.6 SE) pointed at the sampler; these checks say whether it is.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import click
import numpy as np


@click.command()
@click.option("--model", "model", default="smollm2", show_default=True, help="smollm2 or an HF model directory")
@click.option("--draws", type=click.IntRange(min=100), default=20000, show_default=True,
              help="draws per sampler mode (seeds, positions)")
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--run", "run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="a pool_vs_trl.py output directory: also score both sides' base-policy samples")
@click.option("--solve-samples", type=click.IntRange(min=0), default=0, show_default=True,
              help="with --run: check 4, this many samples per first-round problem on each sampler (0: skip)")
@click.option("--surprise/--no-surprise", default=True, show_default=True, help="with --run: check 3")
def main(model: str, draws: int, threads: int, run_dir: Path | None, solve_samples: int, surprise: bool) -> None:
    import torch

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.models import smollm2_dir
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.replay import gumbel_sample, sample_seed
    from intellect.verifier.submission import prompt_text

    torch.set_num_threads(threads)
    eng = TransformersEngine()
    eng.load(smollm2_dir() if model == "smollm2" else Path(model))
    tok = eng.tokenizer
    chat = tok if getattr(tok, "chat_template", None) else None
    task = list(synthetic_task_set(8, seed=5, max_operand=20, ops=("+",), name="probe"))[3]

    click.echo("1. sampler draws against softmax(logits)")
    for prefix in ("", " The answer is"):
        ids = tok(prompt_text(task, None, chat) + prefix, return_tensors="pt", add_special_tokens=False).input_ids
        with torch.no_grad():
            logits = eng.model(ids).logits[0, -1].float()
        p = torch.softmax(logits, -1).numpy().astype(np.float64)
        top = np.argsort(-p)[:12]
        for mode in ("seeds", "positions"):
            t0 = time.perf_counter()
            counts = np.zeros(p.size, dtype=np.int64)
            for start in range(0, draws, 250):
                n = min(250, draws - start)
                if mode == "seeds":
                    seeds, pos = [sample_seed(12345, start + i) for i in range(n)], [0] * n
                else:
                    seeds, pos = [sample_seed(12345, 0)] * n, list(range(start, start + n))
                np.add.at(counts, gumbel_sample(logits[None].expand(n, -1), seeds, pos, 1.0).numpy(), 1)
            expected = p[top] * draws
            chi2 = float(((counts[top] - expected) ** 2 / expected).sum())
            tail_obs, tail_exp = draws - int(counts[top].sum()), draws * (1 - float(p[top].sum()))
            chi2 += (tail_obs - tail_exp) ** 2 / tail_exp
            zs = [(counts[j] - p[j] * draws) / math.sqrt(draws * p[j] * (1 - p[j])) for j in top]
            click.echo(f"   prompt+{prefix!r:16} {mode:9} {draws} draws ({time.perf_counter() - t0:.0f} s): chi-square "
                       f"{chi2:.1f} on 12 dof (1 % critical 26.2); rest {tail_obs} vs {tail_exp:.0f} expected; "
                       f"top-12 |z| max {max(abs(z) for z in zs):.2f}")

    click.echo("2. the batched engine against clean forward passes")
    tasks = list(synthetic_task_set(16, seed=5, max_operand=2000, ops=("+", "-", "*"), name="probe"))
    prompts = [prompt_text(t, None, chat) + " " * (3 * (i % 5)) for i, t in enumerate(tasks)]
    gens = eng.generate(prompts, SamplingParams(max_tokens=16, temperature=1.0, seed=3, capture_proofs=False))
    worst, tokens = 0.0, 0
    for g in gens:
        with torch.no_grad():
            lp = torch.log_softmax(eng.model(torch.tensor([g.prompt_ids + g.completion_ids])).logits[0].float(), -1)
        n = len(g.prompt_ids)
        for k, (t, got) in enumerate(zip(g.completion_ids, g.logprobs, strict=True)):
            worst = max(worst, abs(float(lp[n - 1 + k, t]) - got))
            tokens += 1
    lengths = sorted({len(g.prompt_ids) for g in gens})
    click.echo(f"   {len(gens)} prompts of {lengths[0]}-{lengths[-1]} tokens in one batch, {tokens} sampled tokens: "
               f"max |engine log-prob - clean forward log-prob| {worst:.2e}")
    greedy = SamplingParams(max_tokens=16, temperature=0.0, capture_proofs=False)
    batched = [g.completion_ids for g in eng.generate(prompts, greedy)]
    alone = [eng.generate([q], greedy)[0].completion_ids for q in prompts]
    same = sum(a == b for a, b in zip(batched, alone, strict=True))
    click.echo(f"   greedy completions batched == one at a time: {same} of {len(prompts)}")
    if run_dir is not None:
        if surprise:
            click.echo(f"3. base-policy samples of {run_dir}: surprise minus entropy (0 for an exact sampler)")
            score_run(eng.model, run_dir)
        if solve_samples:
            click.echo(f"4. solve rates on the first round's problems of {run_dir}, {solve_samples} samples each")
            solve_rates(eng, run_dir, solve_samples)



def _surprise_minus_entropy(model: Any, pairs: list[tuple[list[int], list[int]]]) -> tuple[float, float, int]:
    """(mean, standard error, tokens) of −log p(token) − H(next-token distribution) over the completions' tokens."""
    import torch

    gaps = []
    for prompt_ids, completion in pairs:
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([prompt_ids + completion])).logits[0].float(), -1)
        n = len(prompt_ids)
        for k, t in enumerate(completion):
            row = lp[n - 1 + k]
            gaps.append(float(-row[t] + (row.exp() * row).sum()))
    g = np.asarray(gaps)
    return float(g.mean()), float(g.std(ddof=1) / math.sqrt(len(g))), len(g)


def score_run(model: Any, run_dir: Path) -> None:
    """Check 3: both sides' base-policy samples of a pool_vs_trl.py run."""
    import json

    from intellect.verifier.rollouts import RolloutFile

    pool, prompts = [], {}
    for path in sorted((run_dir / "pool" / "rollouts").glob("round-*.rollouts")):
        rf = RolloutFile.read(path)
        for r in rf.rows:
            prompts.setdefault(r.problem_id, list(r.prompt_ids))
            if rf.meta.policy_step == 0:
                pool.append((list(r.prompt_ids), list(r.completion_ids)))
    trl = []
    for line in (run_dir / "trl" / "samples.jsonl").read_text().splitlines():
        d = json.loads(line)
        if d["call"] == 0 and d["task_id"] in prompts:  # TRL's prompt is the pool's text, tokenised alike
            trl.append((prompts[d["task_id"]], list(d["completion_ids"])))
    for name, pairs in (("pool (policy step 0)", pool), ("TRL (first generation)", trl)):
        mean, se, n = _surprise_minus_entropy(model, pairs)
        click.echo(f"   {name:24} {len(pairs)} completions, {n} tokens: mean(-log p - entropy) {mean:+.3f} "
                   f"(SE {se:.3f})")


def solve_rates(eng: Any, run_dir: Path, k: int) -> None:
    """Check 4: the base model's solve rate on the run's first-round problems, by three samplers."""
    import importlib.util
    import json
    import sys

    import torch

    from intellect.agents.engines import SamplingParams
    from intellect.verifier.rewards import task_reward
    from intellect.verifier.rollouts import RolloutFile
    from intellect.verifier.submission import prompt_text

    spec = importlib.util.spec_from_file_location("pool_vs_trl", Path(__file__).with_name("pool_vs_trl.py"))
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules["pool_vs_trl"] = bench  # its dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    cfg = bench.BenchConfig(**json.loads((run_dir / "pool-vs-trl.json").read_text())["config"])
    by_id = {t.id: t for t in bench.load_tasks(cfg)[0]}  # the training set before the filter: same ids
    ids = [r.problem_id for path in sorted((run_dir / "pool" / "rollouts").glob("round-0-*.rollouts"))
           for r in RolloutFile.read(path).rows]
    tasks = [by_id[i] for i in dict.fromkeys(ids)]
    tok = eng.tokenizer
    chat = tok if getattr(tok, "chat_template", None) else None
    prompts = [prompt_text(t, cfg.target_len, chat) for t in tasks for _ in range(k)]
    graded = [t for t in tasks for _ in range(k)]

    def solved(texts: list[str]) -> str:
        n = sum(task_reward(t, x) > 0 for t, x in zip(graded, texts, strict=True))
        p = n / len(texts)
        return f"{n} of {len(texts)} ({p:.3f}, SE {math.sqrt(p * (1 - p) / len(texts)):.3f})"

    for proofs, base in ((True, 7777), (False, 8888)):
        gens = eng.generate(prompts, SamplingParams(max_tokens=cfg.max_new_tokens, temperature=cfg.temperature,
                                                    seed=base, capture_proofs=proofs))
        texts = [g.text for g in gens]  # what the pool's workers grade (`rollout_rows`)
        click.echo(f"   pool engine, TOPLOC capture {'on ' if proofs else 'off'}: solved {solved(texts)}")
    torch.manual_seed(0)
    side, tok.padding_side = tok.padding_side, "left"
    texts = []
    try:
        for start in range(0, len(prompts), 64):
            batch = tok(prompts[start:start + 64], return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                out = eng.model.generate(**batch, do_sample=True, temperature=cfg.temperature, top_k=0, top_p=1.0,
                                         max_new_tokens=cfg.max_new_tokens, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.eos_token_id)
            texts += tok.batch_decode(out[:, batch.input_ids.shape[1]:], skip_special_tokens=True)
    finally:
        tok.padding_side = side
    click.echo(f"   HF generate (multinomial, TRL's sampling):  solved {solved(texts)}")
    try:
        texts = trl_generation(cfg, eng.checkpoint_dir, prompts)
    except ImportError:
        click.echo("   TRL's own generation: skipped (trl is not installed: run in .venv-trl)")
        return
    click.echo(f"   TRL's own generation (GRPOTrainer's path):  solved {solved(texts)}")


def trl_generation(cfg: Any, model_dir: Path, prompts: list[str], batch: int = 64) -> list[str]:
    """The completions of `prompts` as TRL's `GRPOTrainer` generates them in the pool-vs-TRL bench: a trainer
    built with the bench's `GRPOConfig` arguments (`BenchConfig.trl_args`), the prompts tokenised by its
    `_tokenize_prompts` and sampled by its `_generate_single_turn` (its `GenerationConfig`, EOS list, left
    padding, masking after the first EOS), decoded as it decodes them for the reward (special tokens skipped).
    Private TRL methods (trl 1.16): what the bench's TRL side runs, not a re-implementation of it."""
    import tempfile

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = GRPOTrainer(model=model, reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
                              args=GRPOConfig(output_dir=tmp, **cfg.trl_args()),
                              train_dataset=Dataset.from_list([{"prompt": p} for p in prompts[:1]]),
                              processing_class=tok)
        torch.manual_seed(1)
        texts: list[str] = []
        for start in range(0, len(prompts), batch):
            prompt_ids, images, fields = trainer._tokenize_prompts(prompts[start:start + batch])
            completion_ids, _ = trainer._generate_single_turn(prompt_ids, images, fields, cfg.group_size)
            texts += tok.batch_decode(completion_ids, skip_special_tokens=True)
    return texts


if __name__ == "__main__":
    main()
