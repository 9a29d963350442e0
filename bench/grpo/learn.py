"""Show that async GRPO learns on CPU: held-out reward before/after, a PNG curve, idle fractions.

Usage (from the repository root):
    .venv/bin/python bench/grpo/learn.py --out runs/bench-grpo                 # learning run + PNG + async 0 vs 2
    .venv/bin/python bench/grpo/learn.py --out runs/bench-grpo-s1 --seed 1     # a second seed
    .venv/bin/python bench/grpo/learn.py --out runs/x --no-throughput          # learning run only

The learning run is `intellect.agents.demo.learn` with its defaults (tiny Llama warm-started for 3600
steps on the clean addition table in four phrasings — `a + b =`, `a + b equals`, `Calculate a + b:`,
`The sum of a and b is`, 75% of the examples — plus the question format `What is a + b?` answered
right 20% of the time on training problems, a, b ≤ 20; 320 training problems, 100 held-out ones
never seen in question format; 400 async GRPO steps of 16 problems × 8 completions, lr 3e-4).
The module docstring of `intellect.agents.demo.learn` says why each piece is there.
The throughput part runs the same loop without held-out evaluation for `--tp-steps` steps at
async level 0 (the baseline: inference and training alternate) and 2, and prints the trainer's
idle fraction of each and their ratio; generation and training tokens/s come from the same runs.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import asdict, replace
from pathlib import Path

import click

from intellect.agents.demo.learn import LearnConfig, plot_curve, run_async_loop


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _proof_overhead(model_dir: Path) -> dict[str, float]:
    """Generation tokens/s of the same 128 prompts with and without TOPLOC capture (same run)."""
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.submission import prompt_text

    engine = TransformersEngine(model_dir)
    prompts = [prompt_text(t) for t in synthetic_task_set(8, seed=11, max_operand=20, ops=("+",))] * 16
    rates = {}
    for capture in (False, True, False, True):
        params = SamplingParams(max_tokens=8, temperature=1.0, seed=0, capture_proofs=capture)
        t0 = time.perf_counter()
        gens = engine.generate(prompts, params)
        rates[capture] = sum(len(g.completion_ids) for g in gens) / (time.perf_counter() - t0)
    click.echo(f"generation {rates[False]:.0f} tok/s without proofs, {rates[True]:.0f} with "
               f"(x{rates[True] / rates[False]:.2f})")
    return {"gen_tok_s_no_proofs": rates[False], "gen_tok_s_proofs": rates[True],
            "ratio": rates[True] / rates[False], "load": float(os.getloadavg()[0])}


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/bench-grpo"), show_default=True,
              help="output directory")
@click.option("--steps", type=int, default=LearnConfig.steps, show_default=True, help="GRPO steps of the learning run")
@click.option("--lr", type=float, default=LearnConfig.lr, show_default=True)
@click.option("--skip-learn", is_flag=True, help="only the throughput part")
@click.option("--seed", type=int, default=LearnConfig.seed, show_default=True,
              help="seed of everything (train/held-out split, warm start, sampling)")
@click.option("--throughput/--no-throughput", default=True, show_default=True,
              help="also measure idle fraction and tokens/s with async level 0 vs 2")
@click.option("--tp-steps", type=int, default=15, show_default=True, help="steps of each throughput run")
@click.option("--model-dir", type=click.Path(path_type=Path, exists=True), default=None,
              help="with --skip-learn: a warm-started model dir to measure throughput on")
@click.option("--proofs/--no-proofs", default=False, show_default=True,
              help="capture TOPLOC proofs in the loop's rollouts (the overhead is measured apart)")
def main(out: Path, steps: int, lr: float, seed: int, skip_learn: bool, throughput: bool, tp_steps: int,
         model_dir: Path | None, proofs: bool) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one "Writing model shards" bar per checkpoint otherwise
    out.mkdir(parents=True, exist_ok=True)
    report: dict[str, object] = {"load_before": _load()}
    base = LearnConfig(run_dir=out / "learn", steps=steps, lr=lr, seed=seed, capture_proofs=proofs)
    if not skip_learn:
        t0 = time.perf_counter()
        result = run_async_loop(base)
        png = plot_curve(result, out / "grpo-learning-curve.png")
        report["learn"] = {
            "heldout_before": result.heldout_before, "heldout_after": result.heldout_after,
            "greedy_before": result.greedy_before, "greedy_after": result.greedy_after,
            "equations_before": result.equations_before, "equations_after": result.equations_after,
            "train_reward_last20": sum(result.train_rewards[-20:]) / max(len(result.train_rewards[-20:]), 1),
            "grpo_s": result.wall_s - result.warm_start_s, "curve": result.curve, "wall_s": time.perf_counter() - t0, "warm_start_s": result.warm_start_s,
            "gen_tokens_per_s": result.gen_tokens_per_s, "train_tokens_per_s": result.train_tokens_per_s,
            "idle_fraction": result.idle_fraction, "png": str(png), "load_after": _load(),
        }
        click.echo(f"held-out reward {result.heldout_before:.3f} -> {result.heldout_after:.3f} "
                   f"(x{result.heldout_after / max(result.heldout_before, 1e-9):.2f}) in "
                   f"{report['learn']['wall_s']:.0f}s (warm start {result.warm_start_s:.0f}s); greedy "
                   f"{result.greedy_before:.2f} -> {result.greedy_after:.2f}; equations {result.equations_before:.2f} -> "
                   f"{result.equations_after:.2f}; load {_load()}; curve {png}")  # type: ignore[index]
        model_dir = base.run_dir / "warm-start"
    if throughput:
        runs = {}
        for level in (0, 2):
            cfg = replace(base, run_dir=out / f"async-{level}", steps=tp_steps, async_level=level, eval_every=0,
                          model_dir=model_dir, heldout_tasks=16, eval_samples=1)
            if model_dir is not None:  # reuse the warm start: copy so the run dir wipe cannot touch it
                keep = out / "warm-start-copy"
                if model_dir.resolve() != keep.resolve():  # this run's model, never an older run's copy
                    shutil.rmtree(keep, ignore_errors=True)
                    shutil.copytree(model_dir, keep)
                cfg = replace(cfg, model_dir=keep)
            r = run_async_loop(cfg)
            runs[level] = {"idle_fraction": r.idle_fraction, "trainer_busy_s": r.trainer_busy_s,
                           "trainer_idle_s": r.trainer_idle_s, "gen_tokens_per_s": r.gen_tokens_per_s,
                           "train_tokens_per_s": r.train_tokens_per_s, "loop_s": r.trainer_busy_s + r.trainer_idle_s,
                           "load": _load()}
            click.echo(f"async_level={level}: trainer idle {r.idle_fraction:.1%}, gen {r.gen_tokens_per_s:.0f} tok/s, "
                       f"train {r.train_tokens_per_s:.0f} tok/s")
        report["throughput"] = runs
        if model_dir is not None:
            report["proof_overhead"] = _proof_overhead(model_dir)
        ratio = runs[2]["idle_fraction"] / max(runs[0]["idle_fraction"], 1e-9)
        speed = runs[0]["loop_s"] / max(runs[2]["loop_s"], 1e-9)
        report["idle_ratio_async2_vs_async0"] = ratio
        report["loop_speedup_async2_vs_async0"] = speed
        click.echo(f"idle fraction async 2 / async 0 = {ratio:.2f}; loop time async 0 / async 2 = {speed:.2f}x")
    report["config"] = {k: str(v) for k, v in asdict(base).items()}
    (out / "bench-grpo.json").write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
