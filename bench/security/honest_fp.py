"""Honest false-positive check: honest submissions generated under varied engine settings, verified the way a
validator does (one batched prefill of the named checkpoint: TOPLOC proofs, the replay of each row's seeded
sampler, and the submission-level aggregate check), counting rejections. Any rejection of honest work would
be a challenge upheld against an honest worker.

Variations per submission (round-robin): generation batch size (1, 4, 8 completions per forward pass),
torch threads on the worker side (1, 2) and on the validator side (2, 1), the validator's prefill batching
(`max_batch_tokens` 64 or 16384). Each submission is `problems` × `group` completions (default 2 × 8 = 16)
with short thinking budgets (target lengths 8..40 tokens: the pool's scale on CPU, a partial proof chunk,
one full chunk, and a full + a partial chunk). Verification uses the validator's TOPLOC profile (`fp32`, the
default of `validator.toploc_profile`; `--profile reference` for the mixed-precision bounds). A positive
control runs in the same loop: every completion again with its middle token changed (proofs kept, the
`altered_completions` cheat) must be rejected, so a zero false-positive count cannot come from a check that
accepts everything.

Usage:
    .venv/bin/python bench/security/honest_fp.py --submissions 200 [--json out.json]

Prints the figure as a ratio: rejected / verified samples (baseline: 0 for honest work), plus throughput.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import logging
import time
from typing import Any

import torch

log = logging.getLogger("bench.security.honest_fp")


PROBLEMS, GROUP = 2, 8  # per submission: 16 completions
BUDGETS = (8, 16, 32, 40)  # target lengths (proof chunks of 32 tokens: partial, full, full + partial)


def _altered(sample: tuple[Any, ...]) -> tuple[Any, ...]:
    """The sample with its middle completion token changed (the altered_completions cheat)."""
    completion = list(sample[1])
    k = len(completion) // 2
    completion[k] = completion[k] - 1 if completion[k] > 0 else completion[k] + 1
    return (sample[0], completion, *sample[2:])


def run(submissions: int, problems: int = PROBLEMS, group: int = GROUP, seed: int = 0,
        budgets: tuple[int, ...] = BUDGETS, profile: str = "fp32", control: bool = True,
        max_seconds: float | None = None) -> dict[str, Any]:
    """Generate and verify `submissions` honest submissions (stop early after `max_seconds`)."""
    from intellect.agents.engines import SamplingParams, TransformersEngine
    from intellect.agents.models import load_model, tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier import toploc
    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.replay import problem_seed, sample_seed
    from intellect.verifier.submission import prompt_text
    from intellect.verifier.tasks import sample_problems
    from intellect.verifier.toploc import DEFAULT_THRESHOLDS, Thresholds

    # the validator's submission-level check (small deviations everywhere), where this verifier has it
    check_aggregate = getattr(toploc, "check_aggregate", None)

    thresholds = {"fp32": Thresholds.fp32(), "reference": DEFAULT_THRESHOLDS}[profile]

    ckpt = tiny_model_dir()
    task_set = synthetic_task_set(64, seed)
    engines = {b: TransformersEngine(device="cpu", max_batch_size=b) for b in (1, 4, 8)}
    for e in engines.values():
        e.load(ckpt)
    validator_model = load_model(ckpt)
    variations = list(itertools.product((1, 4, 8), (1, 2), (64, 16384)))
    samples_total = rejected = submissions_rejected = 0
    control_total = control_caught = 0
    reasons: dict[str, int] = {}
    t0 = time.perf_counter()
    done = 0
    threads0 = torch.get_num_threads()
    for k in range(submissions):
        if max_seconds is not None and time.perf_counter() - t0 > max_seconds:
            log.warning("time budget of %.0f s spent after %d submissions", max_seconds, k)
            break
        batch, threads, max_batch_tokens = variations[k % len(variations)]
        claim_seed = hashlib.sha256(f"honest-{seed}-{k}".encode()).digest()
        assigned = sample_problems(task_set, claim_seed, problems, list(budgets))
        samples = []
        torch.set_num_threads(threads)
        for j, a in enumerate(assigned):  # seeded like the worker; the validator replays each row's sampler
            params = SamplingParams(max_tokens=a.target_len, temperature=1.0, seed=problem_seed(claim_seed, j),
                                    capture_proofs=True)
            gens = engines[batch].generate([prompt_text(task_set[a.task_id], a.target_len)] * group, params)
            samples += [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs),
                         sample_seed(problem_seed(claim_seed, j), i)) for i, g in enumerate(gens)]
        torch.set_num_threads(3 - threads)
        results = verify_samples(validator_model, samples, thresholds, temperature=1.0,
                                 max_batch_tokens=max_batch_tokens)
        if control:  # positive control under the same variation: one token altered mid-completion, proofs kept
            altered = [_altered(smp) for smp in samples if len(smp[1]) >= 2]
            caught = verify_samples(validator_model, altered, thresholds, temperature=1.0,
                                    max_batch_tokens=max_batch_tokens)
            control_total += len(caught)
            control_caught += sum(1 for r in caught if not r.ok)
        samples_total += len(results)
        for r in results:
            if not r.ok:
                rejected += 1
                reasons[str(r.reason)] = reasons.get(str(r.reason), 0) + 1
                log.warning("submission %d (batch %d, threads %d): honest sample rejected: %s %s", k, batch,
                            threads, r.reason, r.detail)
        agg = check_aggregate(results, thresholds) if check_aggregate is not None else None
        if any(not r.ok for r in results) or (agg is not None and not agg.ok):
            submissions_rejected += 1
            if agg is not None and not agg.ok:
                reasons[f"aggregate:{agg.reason}"] = reasons.get(f"aggregate:{agg.reason}", 0) + 1
                log.warning("submission %d (batch %d, threads %d): honest submission rejected: %s %s", k, batch,
                            threads, agg.reason, agg.detail)
        done = k + 1
        if (k + 1) % 10 == 0:
            log.info("%d/%d submissions, %d samples, %d rejected", k + 1, submissions, samples_total, rejected)
    torch.set_num_threads(threads0)
    seconds = time.perf_counter() - t0
    return {"submissions": done, "requested": submissions, "samples": samples_total, "rejected": rejected,
            "submissions_rejected": submissions_rejected, "aggregate_check": check_aggregate is not None,
            "replayed_sampler": True, "reasons": reasons, "control_altered": control_total,
            "control_caught": control_caught, "false_positive_rate": rejected / max(samples_total, 1),
            "seconds": round(seconds, 1), "variations": len(variations), "profile": profile,
            "samples_per_submission": problems * group, "budgets": list(budgets)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--submissions", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="also write the figures here")
    ap.add_argument("--max-seconds", type=float, default=None, help="stop early after this long")
    ap.add_argument("--problems", type=int, default=PROBLEMS)
    ap.add_argument("--group", type=int, default=GROUP)
    ap.add_argument("--profile", choices=("fp32", "reference"), default="fp32",
                    help="TOPLOC bounds (the validator's default: fp32)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    out = run(args.submissions, args.problems, args.group, seed=args.seed, profile=args.profile,
              max_seconds=args.max_seconds)
    print(f"honest false positives: {out['rejected']}/{out['samples']} samples "
          f"({out['false_positive_rate']:.4%}; baseline 0), {out['submissions_rejected']}/{out['submissions']} "
          f"submissions (aggregate check {'on' if out['aggregate_check'] else 'absent'}) of "
          f"{out['samples_per_submission']} completions, {out['variations']} engine/thread/batch variations, "
          f"TOPLOC profile {out['profile']}, {out['seconds']} s "
          f"({out['submissions'] / max(out['seconds'], 1e-9):.2f} submissions/s)")
    if out["control_altered"]:
        print(f"positive control (same run): {out['control_caught']}/{out['control_altered']} samples with one "
              f"altered token rejected ({out['control_caught'] / out['control_altered']:.2%})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
