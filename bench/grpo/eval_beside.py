"""Training step time with held-out evaluation inline (the trainer before issue 37) and beside training (its own
thread and engine, `intellect.agents.roles.eval_thread.BackgroundEvaluator`), against no evaluation, in one run.

Usage (from the repository root):
    .venv/bin/python bench/grpo/eval_beside.py --steps 6 --eval-tasks 24 --eval-tokens 24 --model tiny

Each mode trains `--steps` GRPO steps (the same fixed batch of `--groups` groups × `--group-size` completions,
checkpoint written each step) and evaluates every step's checkpoint on `--eval-tasks` held-out problems:
  none:   no evaluation (the baseline step time);
  inline: evaluation after each step, on the training thread (what the trainer did: a step waits for it);
  beside: evaluation submitted to the evaluation thread; the next step starts at once.
Reported per mode: mean seconds per step (train_step + checkpoint only), the wall time of all steps (for inline
that includes the evaluations), and for beside the wall time until the last evaluation finished too.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import click


@click.command()
@click.option("--steps", default=6, show_default=True)
@click.option("--groups", default=8, show_default=True)
@click.option("--group-size", default=4, show_default=True)
@click.option("--eval-tasks", default=24, show_default=True)
@click.option("--eval-tokens", default=24, show_default=True)
@click.option("--model", default="tiny", show_default=True, help="tiny | smollm2 | an HF model dir")
@click.option("--threads", default=1, show_default=True, help="torch intra-op threads (per side)")
@click.option("--out", type=click.Path(path_type=Path), default=Path("runs/eval-beside"), show_default=True)
def main(steps: int, groups: int, group_size: int, eval_tasks: int, eval_tokens: int, model: str, threads: int,
         out: Path) -> None:
    import torch

    from intellect.agents.engines import TransformersEngine
    from intellect.agents.evaluation import evaluate_checkpoint
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
    from intellect.agents.roles.eval_thread import BackgroundEvaluator
    from intellect.agents.tasks import synthetic_task_set
    from intellect.agents.taskset_filter import resolve_model

    torch.set_num_threads(threads)
    base = resolve_model(model)
    held = list(synthetic_task_set(eval_tasks, seed=7, max_operand=20, ops=("+",)))
    train = list(synthetic_task_set(groups, seed=3, max_operand=20, ops=("+",)))

    def batch(gt: GRPOTrainer) -> list[Sample]:
        tok = gt.tokenizer
        out_s: list[Sample] = []
        for i, t in enumerate(train):
            prompt = tok(t.prompt, add_special_tokens=False)["input_ids"]
            for j in range(group_size):
                text = f" {int(t.answer) + (0 if j == 0 else j)}"
                adv = 1.5 if j == 0 else -0.5
                out_s.append(Sample(f"p{i}", prompt, tok(text, add_special_tokens=False)["input_ids"]
                                    + [tok.eos_token_id], adv, gt.step))
        return out_s

    results: dict[str, dict[str, float]] = {}
    for mode in ("none", "inline", "beside", "none"):
        run = out / f"{mode}-{len(results)}"
        gt = GRPOTrainer(base, run / "ckpt", GRPOConfig(lr=1e-4, optimizer_steps=1, max_completion_tokens=8,
                                                        keep_checkpoints=steps + 2))
        gt.save_checkpoint()
        engine = TransformersEngine(device="cpu")
        evals: list[float] = []

        def evaluate(step: int, gt: GRPOTrainer = gt, engine: TransformersEngine = engine,
                     evals: list[float] = evals) -> float:
            r = evaluate_checkpoint(gt.checkpoint_path(step), held, max_tokens=eval_tokens, engine=engine,
                                    chat_template=False)
            evals.append(r.pass_at_1)
            return r.pass_at_1

        ev = BackgroundEvaluator(evaluate) if mode == "beside" else None
        step_s: list[float] = []
        t0 = time.perf_counter()
        for _ in range(steps):
            s0 = time.perf_counter()
            gt.train_step(batch(gt))
            step_s.append(time.perf_counter() - s0)
            if mode == "inline":
                evaluate(gt.step)
            elif ev is not None:
                ev.submit(gt.step)
        wall = time.perf_counter() - t0
        if ev is not None:
            ev.wait_idle()
            ev.stop()
        key = mode if mode not in results else f"{mode}-again"
        results[key] = {"step_s_mean": statistics.mean(step_s), "step_s_median": statistics.median(step_s),
                        "wall_steps_s": wall, "wall_with_evals_s": time.perf_counter() - t0,
                        "evaluations": len(evals)}
        click.echo(f"{key:11s} step {statistics.mean(step_s):.3f} s (median {statistics.median(step_s):.3f}), "
                   f"{steps} steps {wall:.1f} s, with evaluations done {time.perf_counter() - t0:.1f} s, "
                   f"{len(evals)} evaluations")
    none = (results["none"]["step_s_mean"] + results["none-again"]["step_s_mean"]) / 2
    summary = {"model": model, "steps": steps, "eval_tasks": eval_tasks, "eval_tokens": eval_tokens,
               "results": results,
               "beside_step_over_none": results["beside"]["step_s_mean"] / none,
               "inline_wall_over_beside_wall": results["inline"]["wall_steps_s"] / results["beside"]["wall_steps_s"]}
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    click.echo(f"step time beside / none: {summary['beside_step_over_none']:.2f}x; wall of the steps inline / beside: "
               f"{summary['inline_wall_over_beside_wall']:.2f}x")


if __name__ == "__main__":
    main()
