"""Validator cost vs worker cost for the same submissions (CPU, tiny model or SmolLM2).

The worker's cost (baseline): generating the rollout file for a claim — `problems` problems ×
`group` completions with TOPLOC proof capture (`Worker.generate_rollouts`' engine calls). The
validator's cost: everything `Validator._verify` does after the fetch — parse the Parquet file,
recompute rewards and advantages, one batched prefill + TOPLOC check (`verify_samples`). Printed
as a ratio, measured in the same run; INTELLECT-2's premise is that checking is much cheaper than
generating.

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

    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.learn import prompt_text
    from intellect.agents.models import smollm2_dir, tiny_model_dir
    from intellect.agents.rollouts import RolloutFile, RolloutMeta, RolloutRow
    from intellect.agents.tasks import synthetic_task_set
    from intellect.agents.worker import score_group
    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.tasks import sample_problems

    torch.set_num_threads(1)
    mdir = tiny_model_dir() if model == "tiny" else smollm2_dir()
    ts = synthetic_task_set(64, seed=0, max_operand=20, ops=("+",))
    engine = TransformersEngine(mdir)
    worker = "0x" + "11" * 20
    files: list[bytes] = []
    t_gen = 0.0
    for k in range(tasks):
        seed = bytes([k]) * 32
        t0 = time.perf_counter()
        rows = []
        for j, a in enumerate(sample_problems(ts, seed, problems, [max_tokens])):
            task = ts[a.task_id]
            gens = engine.generate([prompt_text(task, a.target_len)] * group,
                                   SamplingParams(max_tokens=a.target_len, seed=k * 100 + j))
            scored = score_group(task, [g.text for g in gens], [len(g.completion_ids) for g in gens], a.target_len, 0.0)
            rows += [RolloutRow(problem_id=task.id, prompt_ids=g.prompt_ids, completion_ids=g.completion_ids,
                                reward=tot, task_reward=tr, length_penalty=lp, target_length=a.target_len, advantage=ad,
                                policy_step=0, proofs=g.proofs, worker=worker)
                     for g, (tr, lp, tot, ad) in zip(gens, scored, strict=True)]
        rf = RolloutFile(RolloutMeta(task_id=str(k), seed=seed.hex(), model="m", worker=worker, policy_step=0,
                                     group_size=group), rows)
        files.append(rf.to_bytes())
        t_gen += time.perf_counter() - t0
    vmodel = AutoModelForCausalLM.from_pretrained(str(mdir)).eval()
    tok = AutoTokenizer.from_pretrained(str(mdir))
    t_ver = 0.0
    ok = 0
    tokens = 0
    for data in files:
        t0 = time.perf_counter()
        rf = RolloutFile.from_bytes(data)
        by_problem: dict[str, list[RolloutRow]] = {}
        for r in rf.rows:
            by_problem.setdefault(r.problem_id, []).append(r)
        for pid, rows in by_problem.items():
            score_group(ts[pid], [tok.decode(r.completion_ids, skip_special_tokens=True) for r in rows],
                        [len(r.completion_ids) for r in rows], rows[0].target_length, 0.0)
        res = verify_samples(vmodel, [(r.prompt_ids, r.completion_ids, r.proofs) for r in rf.rows])
        t_ver += time.perf_counter() - t0
        ok += sum(r.ok for r in res)
        tokens += sum(len(r.completion_ids) for r in rf.rows)
    n = tasks * problems * group
    click.echo(f"model {model}: {tasks} submissions, {n} completions, {tokens} tokens; {ok}/{n} verified ok")
    click.echo(f"worker generate (baseline): {t_gen:.2f} s ({tokens / t_gen:.0f} tok/s)")
    click.echo(f"validator verify:           {t_ver:.2f} s ({tokens / t_ver:.0f} tok/s)")
    click.echo(f"verify / generate = {t_ver / t_gen:.3f}  (generate is {t_gen / t_ver:.1f}x the verification cost)")


if __name__ == "__main__":
    main()
