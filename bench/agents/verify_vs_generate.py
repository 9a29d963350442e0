"""Validator cost vs worker cost for the same submissions (CPU, tiny model or SmolLM2).

The worker's cost (baseline): generating the rollout file for a claim — `problems` problems ×
`group` completions with TOPLOC proof capture (`intellect.agents.generate.generate_for_claim`, what
`Worker.generate_rollouts` runs). The validator's cost: `intellect.verifier.submission.check_submission`
on the file's bytes, what `Validator.verify_submission` runs after the fetch — parse the Parquet file,
the claim and assignment checks, recompute rewards and advantages, one batched prefill + TOPLOC and
sampler-replay check. Printed as a ratio, measured in the same run; INTELLECT-2's premise is that
checking is much cheaper than generating.

    .venv/bin/python bench/agents/verify_vs_generate.py --tasks 8 --max-tokens 32
"""

from __future__ import annotations

import time

import click
import torch


@click.command()
@click.option("--tasks", default=8, show_default=True, help="submissions to generate and verify")
@click.option("--problems", default=2, show_default=True)
@click.option("--group", default=4, show_default=True)
@click.option("--max-tokens", default=32, show_default=True)
@click.option("--model", default="tiny", show_default=True, help="tiny or smollm2")
def main(tasks: int, problems: int, group: int, max_tokens: int, model: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from intellect.agents.engines import TransformersEngine
    from intellect.agents.generate import generate_for_claim
    from intellect.agents.models import smollm2_dir, tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.submission import Checkpoint, Claim, SubmissionRules, check_submission
    from intellect.verifier.toploc import proofs_hash

    torch.set_num_threads(1)
    mdir = tiny_model_dir() if model == "tiny" else smollm2_dir()
    ts = synthetic_task_set(64, seed=0, max_operand=20, ops=("+",))
    engine = TransformersEngine(mdir)
    worker = "0x" + "11" * 20
    rules = SubmissionRules(problems_per_task=problems, group_size=group, length_alpha=0.0, temperature=1.0,
                            budgets={"cpu": [max_tokens]})
    files: list[tuple[int, bytes, Claim]] = []
    t_gen = 0.0
    for k in range(tasks):
        seed = bytes([k]) * 32
        t0 = time.perf_counter()
        rf = generate_for_claim(engine, ts, seed, task_id=k, problems=problems, budgets=[max_tokens], group_size=group,
                                temperature=rules.temperature, length_alpha=rules.length_alpha, policy_step=0,
                                worker=worker, model="m")
        files.append((k, rf.to_bytes(), Claim(
            submission_id=k, node=worker, policy_step=0, rollouts_cid=f"task-{k}",
            proofs_hash="0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex(),
            work_units=sum(len(r.completion_ids) for r in rf.rows), seed=lambda seed=seed: seed,
            budget_class=lambda: "cpu")))
        t_gen += time.perf_counter() - t0
    checkpoint = Checkpoint(AutoModelForCausalLM.from_pretrained(str(mdir)).eval(),
                            AutoTokenizer.from_pretrained(str(mdir)), "m")
    t_ver = 0.0
    ok = 0
    tokens = 0
    for _k, data, claim in files:
        t0 = time.perf_counter()
        verdict = check_submission(data, claim, ts, rules, lambda step: checkpoint)
        t_ver += time.perf_counter() - t0
        ok += verdict.accepted
        tokens += claim.work_units
    n = tasks * problems * group
    click.echo(f"model {model}: {tasks} submissions, {n} completions, {tokens} tokens; {ok}/{tasks} submissions accepted")
    click.echo(f"worker generate (baseline): {t_gen:.2f} s ({tokens / t_gen:.0f} tok/s)")
    click.echo(f"validator verify:           {t_ver:.2f} s ({tokens / t_ver:.0f} tok/s)")
    click.echo(f"verify / generate = {t_ver / t_gen:.3f}  (generate is {t_gen / t_ver:.1f}x the verification cost)")


if __name__ == "__main__":
    main()
