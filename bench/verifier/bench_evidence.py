"""Issue 35: the error matrix and the sequential test (evidence that accumulates per worker), one command each.

`collect` (resumable: one JSON line per judged submission under `--out`, a rerun skips what is there) generates
submissions of the pool's shape (2 problems × 4 completions, target lengths 8/16/32/40) on the tiny model (and
`--model smollm2` when it is cached) by honest workers in bf16 and fp32 (the transformers engine on CPU) and by the
cheats, and checks each one as the validator does against the CPU fp32 validator: ONE `verify_samples` under the
`mixed` profile (TOPLOC + the seeded sampler replayed), the `fp32` profile judged again from the same statistics
(`toploc.rejudge`, no model work), the aggregate and the replay budget, where completions end; it stores the
per-token replay margins that are not 0 and each chunk's exponent mismatches (what `intellect.verifier.evidence`
bins), the verdicts, and the time of the check and of the evidence step.

Cheats (on every `--attack-every`-th submission, same prompts, budgets and seeds, computing in the pair's dtype):
4-bit, int8 and 1 % weight-noise copies, each proven with one prefill of the real checkpoint and with its own
states; steering (the highest-logit token within the `mixed` tolerance 1.0 of the seeded draw) at 1, 2 and 5 tokens
per submission and at the full budget (every tie ≤ 0.25, which the budget does not count, plus the budget of
differing tokens, 2 + 0.2 % of the submission's tokens).

`analyse` reads the lines, calibrates the honest histograms on the first half of each pair's honest submissions
(`--calib-share`), and reports: the error matrix (tokens, differing tokens, margins, per-submission LLR quantiles,
verdicts accept / ambiguous / reject per profile), and the sequential test: for each cheat, `--runs` histories
drawn (fixed seed) from its submissions, the submissions until flagged (median, p99, share flagged within 10 / 20 /
50); for honest workers, the CUSUM over the held-out honest submissions (false flags, ambiguous verdicts).

    nice -n 10 python bench/verifier/bench_evidence.py collect --out runs/evidence --submissions 150 \
        --attack-every 2 --max-seconds 720
    python bench/verifier/bench_evidence.py analyse --out runs/evidence --md runs/evidence/report.md

`--cheat '4-bit copy, proven' --cheat 'full budget'` judges only the cheat cases whose name contains one of those
strings (the larger model's attack rounds, where each cheat costs minutes).

`--submissions N` is N submission indices, each judged once per pair: N honest submissions per pair. Attack rounds
can run beside an honest-only collection: `collect --out OTHER --attack-every M --attacks-only` (the same seeds; no
honest line written), then append OTHER/submissions.jsonl to the honest run's. `analyse` also judges the
calibration half by rules calibrated on the held-out half (every honest submission out of sample once) and every
honest submission under the rules the code ships (`DEFAULT_RULES`: for another model, whether that calibration
covers it). `export --model smollm2 --calib-share 0 --dest …` writes another model's streams, all held out.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_pairs import noisy  # the 1 % weight perturbation
from calibrate_steering import honest_submission, own_submission, quantised  # issue 22's cheap copies

log = logging.getLogger("bench.verifier.bench_evidence")

PROBLEMS, GROUP = 2, 4
BUDGETS = (8, 16, 32, 40)
WORKERS = {"cpu-bf16": "bfloat16", "cpu-fp32": "float32"}
STEER = {"steering 1 token": 1, "steering 2 tokens": 2, "steering 5 tokens": 5, "steering at the full budget": -1}


def steered_k(model: Any, prompts: list[list[int]], budgets: list[int], seeds: list[int], k: int, tolerance: float,
              tie: float, eos: frozenset[int]) -> list[list[int]]:
    """Completions that follow the seeded draw except at up to `k` positions per submission, where the highest-logit
    token within `tolerance` of the draw replaces it (k = -1: the full budget: every replacement within the tie
    margin, which the budget does not count, plus 2 + 0.2 % of the submission's tokens above it)."""
    from intellect.verifier.replay import gumbel_noise, masked_scores
    from intellect.verifier.toploc import PROFILES, replay_differing_allowed

    free_ties = k < 0
    left = replay_differing_allowed(sum(budgets), PROFILES["mixed"]) if k < 0 else k
    outs: list[list[int]] = []
    with torch.inference_mode():
        for prompt, budget, seed in zip(prompts, budgets, seeds, strict=True):
            out: list[int] = []
            for p in range(budget):
                logits = model(input_ids=torch.tensor([prompt + out])).logits[0, -1, :].float()  # (V,)
                sc = masked_scores(logits[None, :], 1.0)[0] + gumbel_noise(seed, p, logits.shape[-1])
                draw = int(sc.argmax())
                allowed = sc >= sc[draw] - tolerance
                cand = int(torch.where(allowed, logits, torch.full_like(logits, -torch.inf)).argmax())
                tok = draw
                if cand != draw:
                    margin = float(sc[draw] - sc[cand])
                    if free_ties and margin <= tie:
                        tok = cand
                    elif left > 0:
                        tok, left = cand, left - 1
                out.append(tok)
                if tok in eos:
                    break
            outs.append(out)
    return outs


def _line(case: str, worker: str, model: str, k: int, samples: list[tuple], budgets: list[int], validator: Any,
          eos: frozenset[int], honest_ids: list[list[int]] | None) -> dict[str, Any]:
    from intellect.verifier.completion import check_completion_end
    from intellect.verifier.evidence import DEFAULT_RULES, observe, submission_llr
    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.toploc import PROFILES, check_aggregate, check_replay_budget, rejudge

    t0 = time.perf_counter()
    res = verify_samples(validator, samples, PROFILES["mixed"], temperature=1.0)
    t1 = time.perf_counter()
    verdicts = {}
    for prof, th in PROFILES.items():
        rr = res if prof == "mixed" else rejudge(res, th)
        why = next((str(r.reason) for r in rr if not r.ok), None)
        if why is None and not (agg := check_aggregate(rr, th)).ok:
            why = str(agg.reason)
        if why is None and not (bud := check_replay_budget(rr, th)).ok:
            why = str(bud.reason)
        if why is None:
            why = next((str(e.error) for e in (check_completion_end(s[1], eos, b) for s, b in
                                               zip(samples, budgets, strict=True)) if not e.ok), None)
        verdicts[prof] = why
    t2 = time.perf_counter()
    llr = submission_llr(observe(res, DEFAULT_RULES), DEFAULT_RULES)  # the evidence step, timed
    t3 = time.perf_counter()
    return {"case": case, "worker": worker, "model": model, "k": k,
            "tokens": sum(len(s[1]) for s in samples),
            "differs": honest_ids is not None and any(list(s[1]) != h for s, h in zip(samples, honest_ids,
                                                                                     strict=True)),
            "replayed": sum(r.replay.positions for r in res if r.replay is not None),
            "margins": [m for r in res if r.replay is not None for m in r.replay.margins],
            "exp": [c.exp_mismatches for r in res for c in r.chunks],
            "verdicts": verdicts, "llr_shipped": llr,
            "verify_s": t1 - t0, "judge_s": t2 - t1, "evidence_s": t3 - t2}


def collect(out: Path, submissions: int, attack_every: int, models: list[str], max_seconds: float,
            seed: int = 0, attacks_only: bool = False, cheats: list[str] | None = None) -> None:
    """`cheats`: judge only the cheat cases whose name contains one of these strings (None: every cheat)."""
    from intellect.agents.engines import TransformersEngine
    from intellect.agents.models import load_model, tiny_model_dir
    from intellect.agents.tasks import synthetic_task_set
    from intellect.verifier.completion import eos_token_ids
    from intellect.verifier.prefill import prefill_hidden_states
    from intellect.verifier.tasks import sample_problems
    from intellect.verifier.toploc import PROFILES, build_proofs

    out.mkdir(parents=True, exist_ok=True)
    path = out / "submissions.jsonl"
    done: set[tuple[str, str, str, int]] = set()
    if path.exists():
        for ln in path.read_text().splitlines():
            try:
                d = json.loads(ln)
            except json.JSONDecodeError:  # a line cut by a kill: ignored, redone
                continue
            done.add((d["model"], d["worker"], d["case"], d["k"]))
    log.info("resuming with %d judged submissions in %s", len(done), path)
    t_start = time.perf_counter()
    task_set = synthetic_task_set(64, seed)

    def wanted(case: str) -> bool:
        return case == "honest" or cheats is None or any(c in case for c in cheats)

    with path.open("a") as f:
        for model_name in models:
            if model_name == "tiny":
                ckpt = tiny_model_dir()
            else:
                from intellect.verifier.models import smollm2_path
                ckpt = smollm2_path()
            validator = load_model(ckpt).eval()
            real32 = load_model(ckpt).eval()
            tok = TransformersEngine(ckpt).tokenizer
            eos = eos_token_ids(validator, tok)
            tmp = Path(tempfile.mkdtemp(prefix="bench-evidence-"))
            makers = {"4-bit copy": lambda m: quantised(m, 4), "int8 copy": lambda m: quantised(m, 8),
                      "weights + 1 % noise": noisy}
            cheap = {n: make(real32) for n, make in makers.items()
                     if attack_every > 0 and any(wanted(f"{n}, {w}") for w in ("its own proofs", "proven with the real model"))}
            dirs = {}
            for name, m in cheap.items():
                d = tmp / name.replace(" ", "_").replace("%", "pct")
                m.save_pretrained(d)
                tok.save_pretrained(d)
                dirs[name] = d
            engines: dict[Any, Any] = {}
            provers: dict[str, Any] = {}
            for k in range(submissions):
                for worker, dtype in WORKERS.items():
                    if time.perf_counter() - t_start > max_seconds:
                        log.warning("time budget of %.0f s spent; rerun the same command to go on", max_seconds)
                        return
                    want_attacks = attack_every > 0 and k % attack_every == 0
                    if attacks_only and not want_attacks:
                        continue
                    cases = [c for c in ["honest"] + ([*(f"{n}, proven with the real model" for n in cheap),
                                                       *(f"{n}, its own proofs" for n in cheap), *STEER]
                                                      if want_attacks else []) if wanted(c)]
                    if all((model_name, worker, c, k) in done for c in cases if not (attacks_only and c == "honest")):
                        continue
                    if worker not in engines:
                        engines[worker] = TransformersEngine(dtype=dtype, max_batch_size=8)
                        engines[worker].load(ckpt)
                        provers[worker] = load_model(ckpt, dtype=dtype).eval()
                    engine = engines[worker]
                    claim = hashlib.sha256(f"evidence-bench-{seed}-{k}".encode()).digest()
                    assigned = sample_problems(task_set, claim, PROBLEMS, list(BUDGETS))
                    honest, prompts, seeds, budgets, bases = honest_submission(engine, task_set, assigned, claim)
                    honest_ids = [list(h[1]) for h in honest]

                    def emit(case: str, samples: list[tuple], hid: list[list[int]] | None = honest_ids,
                             worker: str = worker, k: int = k, budgets: list[int] = budgets,
                             model_name: str = model_name, validator: Any = validator,
                             eos: frozenset[int] = eos) -> None:
                        if (model_name, worker, case, k) in done:
                            return
                        f.write(json.dumps(_line(case, worker, model_name, k, samples, budgets, validator, eos,
                                                 hid)) + "\n")
                        f.flush()
                        done.add((model_name, worker, case, k))

                    if not attacks_only:
                        emit("honest", honest, None)
                    if not want_attacks:
                        continue
                    prover = provers[worker]

                    def proven(comps: list[list[int]], prover: Any = prover, prompts: list = prompts,
                               seeds: list = seeds) -> list[tuple]:
                        states = prefill_hidden_states(prover, prompts, comps)
                        return [(p, c, build_proofs(h), s) for p, c, h, s in zip(prompts, comps, states, seeds,
                                                                                  strict=True)]

                    for name, d in dirs.items():
                        variants = [f"{name}, {w}" for w in ("its own proofs", "proven with the real model")]
                        if all((model_name, worker, c, k) in done or not wanted(c) for c in variants):
                            continue
                        if (worker, name) not in engines:
                            engines[(worker, name)] = TransformersEngine(dtype=dtype, max_batch_size=8)
                            engines[(worker, name)].load(d)
                        eng = engines[(worker, name)]
                        own, comps = own_submission(eng, task_set, bases)
                        if wanted(variants[0]):
                            emit(variants[0], [(*o, s) for o, s in zip(own, seeds, strict=True)])
                        if wanted(variants[1]):
                            emit(variants[1], proven(comps))
                    th = PROFILES["mixed"]
                    for case, kk in STEER.items():
                        if (model_name, worker, case, k) in done or not wanted(case):
                            continue
                        comps = steered_k(prover, prompts, budgets, seeds, kk, th.max_replay_margin or 1.0,
                                          th.replay_tie_margin, eos)
                        emit(case, proven(comps))
                    if (k + 1) % 10 == 0:
                        log.info("%s %s: %d submissions (%.0f s)", model_name, worker, k + 1,
                                 time.perf_counter() - t_start)


# ---------------------------------------------------------------------------------------------
# analysis


def _q(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def analyse(out: Path, calib_share: float, runs: int, md: Path | None, seed: int = 0,
            weights: dict[str, float] | None = None) -> dict[str, Any]:
    """`weights`: `default_rules`' cheat-alternative shares (`margin_weight`, `exp_weight`) of the rules calibrated
    here (None: its defaults, the shipped rules')."""
    weights = weights or {}
    from intellect.verifier.evidence import (
        DEFAULT_RULES,
        EXP_EDGES,
        MARGIN_EDGES,
        PUBLISHED_MARGIN_COUNTS,
        Observations,
        WorkerEvidence,
        default_rules,
        submission_llr,
    )

    lines = [json.loads(ln) for ln in (out / "submissions.jsonl").read_text().splitlines() if ln.strip()]
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for d in lines:
        by[(d["model"], d["worker"], d["case"])].append(d)
    for v in by.values():
        v.sort(key=lambda d: d["k"])

    def counts(ds: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
        """The summed `_binned` observations of submissions `ds`."""
        bins = [_binned(d) for d in ds]
        return ([sum(b["replay_margin"][i] for b in bins) for i in range(len(MARGIN_EDGES))],
                [sum(b["toploc_exp_mismatches"][i] for b in bins) for i in range(len(EXP_EDGES))])

    report: dict[str, Any] = {"models": {}}
    md_lines: list[str] = []
    for model in sorted({k[0] for k in by}):
        # calibration: the first `calib_share` of each pair's honest submissions; the rest are held out
        calib_m, calib_e, held, first, swap_m, swap_e = {}, {}, {}, {}, {}, {}
        for worker in WORKERS:
            hs = by.get((model, worker, "honest"), [])
            n = int(len(hs) * calib_share)
            calib_m[worker], calib_e[worker] = counts(hs[:n])
            held[worker], first[worker] = hs[n:], hs[:n]
            swap_m[worker], swap_e[worker] = counts(hs[n:])  # the cross-check: the halves' roles swapped
        # the rules the code ships when these data are the calibration: §1.2's published token counts + this run's
        # calibration half (`evidence.HONEST_*_COUNTS`); the pool's default class is the most tolerant one, bf16
        pub = PUBLISHED_MARGIN_COUNTS if model == "tiny" else {w: (0,) * len(MARGIN_EDGES) for w in WORKERS}
        rules = default_rules({w: [a + b for a, b in zip(pub[w], calib_m[w], strict=True)] for w in WORKERS},
                              {w: calib_e[w] for w in WORKERS}, default_class="cpu-bf16", **weights)
        swapped = default_rules({w: [a + b for a, b in zip(pub[w], swap_m[w], strict=True)] for w in WORKERS},
                                {w: swap_e[w] for w in WORKERS}, default_class="cpu-bf16", **weights)

        cache: dict[tuple[int, str | None], float] = {}

        def llr(d: dict[str, Any], cls: str | None = None, rules: Any = rules, cache: dict = cache) -> float:
            key = (id(d), cls, id(rules))
            if key not in cache:
                mc, ec = counts([d])
                cache[key] = submission_llr(Observations(counts={"replay_margin": tuple(mc),
                                                                 "toploc_exp_mismatches": tuple(ec)}), rules, cls)
            return cache[key]

        rows = []
        md_lines += [f"### {model}: error matrix (validator CPU fp32; LLR under the pool default class `cpu-bf16`, "
                     f"h = {rules.threshold:.1f}, ambiguous at LLR ≥ {rules.ambiguous_llr:.1f})", "",
                     "| pair | case | submissions (differ) | tokens | differing > 0.25 / ≠ 0 | largest margin | "
                     "max exp. mismatches | LLR (`cpu-bf16` class) p50 / p99 / max | `mixed`: accept / ambiguous / reject | "
                     "`fp32` (LLR of the `cpu-fp32` class): accept / ambiguous / reject |",
                     "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for (m, worker, case), ds in sorted(by.items(), key=lambda kv: (kv[0][1], kv[0][2] != "honest", kv[0][2])):
            if m != model:
                continue
            ds_eval = held[worker] if case == "honest" else ds
            ls = [llr(d) for d in ds_eval]
            bands = {}
            for prof, cls in (("mixed", "cpu-bf16"), ("fp32", "cpu-fp32")):
                # `check_submission`'s bands: reject = the profile's bounds; ambiguous = within them, but the
                # submission's LLR (under the profile's evidence class) ≥ ambiguous_llr; accept = the rest
                acc = amb = rej = 0
                for d in ds_eval:
                    if d["verdicts"][prof] is not None:
                        rej += 1
                    elif llr(d, cls) >= rules.ambiguous_llr:
                        amb += 1
                    else:
                        acc += 1
                bands[prof] = (acc, amb, rej)
            margins = [x for d in ds_eval for x in d["margins"]]
            row = {"pair": worker, "case": case, "submissions": len(ds_eval),
                   "differ": sum(d["differs"] for d in ds_eval), "tokens": sum(d["tokens"] for d in ds_eval),
                   "differing": sum(1 for x in margins if x > 0.25), "flips": len(margins),
                   "max_margin": max([x for x in margins if x != math.inf], default=0.0),
                   "max_exp": max((e for d in ds_eval for e in d["exp"]), default=0),
                   "llr": (_q(ls, 0.5), _q(ls, 0.99), max(ls, default=float("nan"))), "bands": bands}
            rows.append(row)
            differ = f" ({row['differ']})" if case != "honest" else " (held out)"
            md_lines.append(f"| {worker} | {case} | {row['submissions']}{differ} | {row['tokens']} | "
                            f"{row['differing']} / {row['flips']} | {row['max_margin']:.3f} | {row['max_exp']} | "
                            f"{row['llr'][0]:.1f} / {row['llr'][1]:.1f} / {row['llr'][2]:.1f} | "
                            + " | ".join(" / ".join(str(x) for x in bands[p]) for p in ("mixed", "fp32")) + " |")
        # the sequential test: histories drawn from each case's submissions that passed `mixed` (the others are
        # rejected outright), in random order, fed to WorkerEvidence until it flags
        rng = random.Random(seed)
        seq_rows = []
        md_lines += ["", f"### {model}: sequential test (CUSUM, h = {rules.threshold:.1f} = ln(horizon "
                     f"{rules.horizon} / false alarm {rules.false_alarm}); {runs} histories per cheat)", "",
                     "| pair | cheat | passing `mixed` / submissions | submissions until flagged: p50 / p99 | "
                     "flagged within 10 / 20 / 50 |", "| --- | --- | --- | --- | --- |"]
        for (m, worker, case), ds in sorted(by.items()):
            if m != model or case == "honest":
                continue
            passing = [llr(d) for d in ds if d["verdicts"]["mixed"] is None]
            if not passing:
                seq_rows.append({"pair": worker, "case": case, "passing": 0, "n": len(ds)})
                md_lines.append(f"| {worker} | {case} | 0 / {len(ds)} | rejected outright | — |")
                continue
            until = []
            for _ in range(runs):
                ev = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
                n = None
                for i in range(200):
                    if ev.add(i, rng.choice(passing), rules):
                        n = i + 1
                        break
                until.append(n if n is not None else math.inf)
            within = [sum(1 for u in until if u <= w) / runs for w in (10, 20, 50)]
            fin = [u for u in until if u != math.inf]
            seq_rows.append({"pair": worker, "case": case, "passing": len(passing), "n": len(ds),
                             "p50": _q(until, 0.5), "p99": _q(until, 0.99), "within": within})
            md_lines.append(f"| {worker} | {case} | {len(passing)} / {len(ds)} | {_q(until, 0.5):g} / "
                            f"{_q(until, 0.99):g} | " + " / ".join(f"{100 * w:.0f} %" for w in within)
                            + (" (never flagged in 200)" if not fin else "") + " |")
        honest_rows = []
        for worker in WORKERS:
            hs = held[worker]
            ev = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            flags = 0
            for i, d in enumerate(hs):
                if ev.add(i, llr(d), rules):
                    flags += 1
                    ev = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            amb = sum(1 for d in hs if d["verdicts"]["mixed"] is None and llr(d) >= rules.ambiguous_llr)
            rej = sum(1 for d in hs if d["verdicts"]["mixed"] is not None)
            # the same history under the `fp32` profile's evidence class (a pool of fp32 nodes)
            ev32 = WorkerEvidence(worker="0x0", compute_class="cpu-fp32")
            flags32 = 0
            for i, d in enumerate(hs):
                if ev32.add(i, llr(d, "cpu-fp32"), rules):
                    flags32 += 1
                    ev32 = WorkerEvidence(worker="0x0", compute_class="cpu-fp32")
            # the cross-check: the calibration half judged by rules calibrated on the held-out half, so that every
            # honest submission is judged out of sample once; rejections (no calibration involved) over all of them
            hf = first[worker]
            evx = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            flags_x = 0
            for i, d in enumerate(hf):
                if evx.add(i, llr(d, rules=swapped), swapped):
                    flags_x += 1
                    evx = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            amb_x = sum(1 for d in hf if d["verdicts"]["mixed"] is None and llr(d, rules=swapped) >= swapped.ambiguous_llr)
            rej_all = sum(1 for d in hf + hs if d["verdicts"]["mixed"] is not None)
            ls_all = [llr(d) for d in hs] + [llr(d, rules=swapped) for d in hf]
            honest_rows.append({"pair": worker, "held_out": len(hs), "flags": flags, "flags_fp32_class": flags32,
                                "ambiguous": amb,
                                "rejected": rej, "max_statistic_llr": max((llr(d) for d in hs), default=0.0),
                                "swapped": {"judged": len(hf), "flags": flags_x, "ambiguous": amb_x},
                                "all": {"submissions": len(hf) + len(hs), "rejected_mixed": rej_all,
                                        "max_llr_out_of_sample": max(ls_all, default=0.0)}})
            md_lines.append(f"| {worker} | **honest** (held out, one history in order) | {len(hs)} / {len(hs)} | "
                            f"false flags: {flags} (`cpu-fp32` class: {flags32}); ambiguous: {amb}; rejected: {rej} | — |")
            md_lines.append(f"| {worker} | **honest**, cross-check (calibration half judged by rules calibrated on the "
                            f"held-out half) | {len(hf)} / {len(hf)} | false flags: {flags_x}; ambiguous: {amb_x}; "
                            f"all {len(hf) + len(hs)} honest: rejected by `mixed` {rej_all}, largest LLR out of "
                            f"sample {max(ls_all, default=0.0):.1f} | — |")
            # every honest submission of the pair, in order, under the rules the code ships (`DEFAULT_RULES`: the
            # tiny model's calibration): for another model, whether that calibration covers it
            evs = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            flags_s, first_flag = 0, None
            ls_s = [llr(d, rules=DEFAULT_RULES) for d in hf + hs]
            for i, x in enumerate(ls_s):
                if evs.add(i, x, DEFAULT_RULES):
                    flags_s += 1
                    first_flag = i + 1 if first_flag is None else first_flag
                    evs = WorkerEvidence(worker="0x0", compute_class="cpu-bf16")
            amb_s = sum(1 for d, x in zip(hf + hs, ls_s, strict=True)
                        if d["verdicts"]["mixed"] is None and x >= DEFAULT_RULES.ambiguous_llr)
            honest_rows[-1]["shipped_rules"] = {"submissions": len(ls_s), "flags": flags_s, "first_flag": first_flag,
                                                "ambiguous": amb_s, "llr_p50": _q(ls_s, 0.5),
                                                "llr_max": max(ls_s, default=0.0)}
            md_lines.append(f"| {worker} | **honest**, all, under the rules the code ships (`DEFAULT_RULES`) | "
                            f"{len(ls_s)} / {len(ls_s)} | false flags: {flags_s}"
                            + (f" (first after {first_flag} submissions)" if first_flag else "")
                            + f"; ambiguous: {amb_s}; LLR p50 {_q(ls_s, 0.5):.1f}, max "
                              f"{max(ls_s, default=0.0):.1f} | — |")
        md_lines.append("")
        t = [d["verify_s"] for d in lines if d["model"] == model and d["case"] == "honest"]
        e = [d["evidence_s"] for d in lines if d["model"] == model and d["case"] == "honest"]
        md_lines.append(f"Validator time per honest submission ({model}): check p50 {_q(t, 0.5) * 1e3:.0f} ms, "
                        f"evidence step (observe + LLR) p50 {_q(e, 0.5) * 1e3:.2f} ms, p99 {_q(e, 0.99) * 1e3:.2f} ms "
                        f"({len(t)} submissions).")
        md_lines.append("")
        report["models"][model] = {"rules": json.loads(rules.model_dump_json(by_alias=True)), "matrix": rows,
                                   "sequential": seq_rows, "honest": honest_rows,
                                   "calibration_counts": {"margin": calib_m, "exp": calib_e}}
    text = "\n".join(md_lines)
    print(text)
    if md is not None:
        md.write_text(text)
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    return report


def write_rules(out: Path, dest: Path, model: str, calib_share: float = 1.0,
                weights: dict[str, float] | None = None) -> Any:
    """The evidence rules a pool on `model` publishes (`intellect pool create --evidence-rules DEST`): the honest
    histograms of the first `calib_share` of each pair's honest submissions (all by default; for the tiny model plus
    §1.2's published token counts, as the shipped rules are made), the default class the most tolerant (bf16)."""
    from intellect.verifier.evidence import (
        MARGIN_EDGES,
        PUBLISHED_MARGIN_COUNTS,
        EvidenceRules,
        default_rules,
    )

    lines = [json.loads(ln) for ln in (out / "submissions.jsonl").read_text().splitlines() if ln.strip()]
    margins, exps, used = {}, {}, {}
    for worker in WORKERS:
        hs = sorted((d for d in lines if d["model"] == model and d["worker"] == worker and d["case"] == "honest"),
                    key=lambda d: d["k"])
        hs = hs[:int(len(hs) * calib_share)]
        if not hs:
            raise SystemExit(f"no honest {worker} submissions of model {model!r} in {out / 'submissions.jsonl'}")
        cal = [_binned(d) for d in hs]
        pub = PUBLISHED_MARGIN_COUNTS[worker] if model == "tiny" else (0,) * len(MARGIN_EDGES)
        margins[worker] = [pub[b] + sum(c["replay_margin"][b] for c in cal) for b in range(len(pub))]
        exps[worker] = [sum(c["toploc_exp_mismatches"][b] for c in cal) for b in range(len(cal[0]["toploc_exp_mismatches"]))]
        used[worker] = len(hs)
    rules = default_rules(margins, exps, default_class="cpu-bf16", **(weights or {}))
    data = rules.to_bytes()
    assert EvidenceRules.from_bytes(data) == rules
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)
    log.info("%s: evidence rules of model %s from %s honest submissions per pair; digest %s, h = %.2f", dest, model,
             used, rules.digest(), rules.threshold)
    return rules


def _binned(d: dict[str, Any]) -> dict[str, list[int]]:
    """One judged submission's observations binned as `intellect.verifier.evidence.observe` bins them."""
    import bisect

    from intellect.verifier.evidence import EXP_EDGES, MARGIN_EDGES

    mc, ec = [0] * len(MARGIN_EDGES), [0] * len(EXP_EDGES)
    mc[0] += d["replayed"] - len(d["margins"])
    for m in d["margins"]:
        mc[min(bisect.bisect_left(MARGIN_EDGES, m), len(MARGIN_EDGES) - 1)] += 1
    for e in d["exp"]:
        ec[min(bisect.bisect_left(EXP_EDGES, float(e)), len(EXP_EDGES) - 1)] += 1
    return {"replay_margin": mc, "toploc_exp_mismatches": ec}


def export(out: Path, dest: Path, calib_share: float, model: str = "tiny") -> None:
    """Test data: the binned observations of every measured submission (per case, pair `cpu-bf16` and `cpu-fp32`),
    honest ones split into the calibration share (whose summed counts are the shipped honest histograms,
    `intellect.verifier.evidence.HONEST_*_COUNTS`) and the held-out rest."""
    from intellect.verifier.evidence import EXP_EDGES, MARGIN_EDGES

    binned = _binned
    lines = [json.loads(ln) for ln in (out / "submissions.jsonl").read_text().splitlines() if ln.strip()]
    lines = [d for d in lines if d["model"] == model]
    if not lines:
        raise SystemExit(f"no submissions of model {model!r} in {out / 'submissions.jsonl'}")
    doc: dict[str, Any] = {"source": f"bench/verifier/bench_evidence.py collect ({model} model, CPU fp32 validator)",
                           "calib_share": calib_share, "calibration": {}, "cases": {}}
    for worker in WORKERS:
        hs = sorted((d for d in lines if d["worker"] == worker and d["case"] == "honest"), key=lambda d: d["k"])
        n = int(len(hs) * calib_share)
        cal = [binned(d) for d in hs[:n]]
        doc["calibration"][worker] = {
            "submissions": n,
            "replay_margin": [sum(c["replay_margin"][b] for c in cal) for b in range(len(MARGIN_EDGES))],
            "toploc_exp_mismatches": [sum(c["toploc_exp_mismatches"][b] for c in cal) for b in range(len(EXP_EDGES))]}
        for d in hs[n:]:
            doc["cases"].setdefault(f"honest {worker}", []).append(
                {"k": d["k"], "mixed_ok": d["verdicts"]["mixed"] is None, "counts": binned(d)})
    for d in sorted(lines, key=lambda d: (d["case"], d["worker"], d["k"])):
        if d["case"] != "honest" and d["worker"] == "cpu-bf16":
            doc["cases"].setdefault(d["case"], []).append(
                {"k": d["k"], "mixed_ok": d["verdicts"]["mixed"] is None, "differs": d["differs"],
                 "counts": binned(d)})
    dest.write_text(json.dumps(doc, indent=None, separators=(",", ":")) + "\n")
    print(json.dumps(doc["calibration"], indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", type=Path, default=Path("runs/evidence"))
    c.add_argument("--submissions", type=int, default=150)
    c.add_argument("--attack-every", type=int, default=2)
    c.add_argument("--models", default="tiny", help="comma-separated: tiny, smollm2")
    c.add_argument("--max-seconds", type=float, default=720.0)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--cheat", action="append", default=None,
                   help="judge only the cheat cases whose name contains this (repeatable: --cheat '4-bit copy, "
                        "proven' --cheat 'full budget'); default every cheat")
    c.add_argument("--attacks-only", action="store_true",
                   help="only the attack rounds (their honest draw is computed, not stored): to run beside an "
                        "honest-only collection into another --out, whose lines are appended to it afterwards")
    a = sub.add_parser("analyse")
    a.add_argument("--out", type=Path, default=Path("runs/evidence"))
    a.add_argument("--calib-share", type=float, default=0.5)
    a.add_argument("--runs", type=int, default=1000)
    a.add_argument("--md", type=Path, default=None)
    x = sub.add_parser("export")
    x.add_argument("--out", type=Path, default=Path("runs/evidence"))
    x.add_argument("--dest", type=Path, default=Path("tests/verifier/data/evidence_streams.json"))
    x.add_argument("--calib-share", type=float, default=0.5)
    x.add_argument("--model", default="tiny", help="whose submissions (tiny: the data the tests read)")
    r = sub.add_parser("rules", help="write the evidence rules a pool on this model publishes")
    r.add_argument("--out", type=Path, default=Path("runs/evidence"))
    r.add_argument("--model", default="smollm2")
    r.add_argument("--calib-share", type=float, default=1.0, help="share of each pair's honest submissions used")
    r.add_argument("--dest", type=Path, required=True)
    for sp in (a, r):
        sp.add_argument("--margin-weight", type=float, default=None,
                        help="δ of the replay margins in the calibrated rules (default: default_rules', 0.01)")
        sp.add_argument("--exp-weight", type=float, default=None,
                        help="δ of TOPLOC's exponent mismatches (default: default_rules', 0.05)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    torch.set_num_threads(1)
    if args.cmd == "collect":
        collect(args.out, args.submissions, args.attack_every, args.models.split(","), args.max_seconds, args.seed,
                args.attacks_only, args.cheat)
    elif args.cmd == "rules":
        write_rules(args.out, args.dest, args.model, args.calib_share, _weights(args))
    elif args.cmd == "export":
        export(args.out, args.dest, args.calib_share, args.model)
    else:
        analyse(args.out, args.calib_share, args.runs, args.md, weights=_weights(args))


def _weights(args: argparse.Namespace) -> dict[str, float]:
    return {k: v for k, v in (("margin_weight", args.margin_weight), ("exp_weight", args.exp_weight)) if v is not None}


if __name__ == "__main__":
    main()
