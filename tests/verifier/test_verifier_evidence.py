"""Issue 35: evidence that accumulates per worker (`intellect.verifier.evidence`) and the three-way verdict.

The histories are simulated from MEASURED submissions (`tests/verifier/data/evidence_streams.json`, written by
`bench/verifier/bench_evidence.py export` from its `collect` run: the tiny model, honest bf16 and fp32 workers and the
cheats against the CPU fp32 validator; each entry is one real submission's binned replay margins and TOPLOC exponent
mismatches). The honest entries are the held-out half: the shipped calibration is the other half. Fixed seed."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from intellect.verifier.evidence import (
    DEFAULT_RULES,
    EXP_EDGES,
    HONEST_EXP_COUNTS,
    HONEST_MARGIN_COUNTS,
    MARGIN_EDGES,
    PUBLISHED_MARGIN_COUNTS,
    Component,
    EvidenceRules,
    Observations,
    WorkerEvidence,
    default_rules,
    recheck_claim,
    rules_for_profile,
    submission_llr,
)
from intellect.verifier.submission import Verdict

DATA = Path(__file__).parent / "data" / "evidence_streams.json"
DOC = json.loads(DATA.read_text())


def _llrs(case: str, rules: EvidenceRules = DEFAULT_RULES, *, passing: bool = True) -> list[float]:
    return [submission_llr(Observations(counts={k: tuple(v) for k, v in s["counts"].items()}), rules)
            for s in DOC["cases"][case] if s["mixed_ok"] or not passing]


def _until_flagged(llrs: list[float], rules: EvidenceRules, rng: random.Random, limit: int) -> int | None:
    ev = WorkerEvidence(worker="0x" + "11" * 20, compute_class=rules.default_class)
    for i in range(limit):
        if ev.add(i, rng.choice(llrs), rules):
            return i + 1
    return None


def test_shipped_calibration_is_the_measured_one():
    """The honest histograms in the code are §1.2's published run plus the calibration half of the measured honest
    submissions (the other half is what the tests below hold out)."""
    for worker in ("cpu-bf16", "cpu-fp32"):
        cal = DOC["calibration"][worker]
        assert [a + b for a, b in zip(PUBLISHED_MARGIN_COUNTS[worker], cal["replay_margin"], strict=True)] == list(
            HONEST_MARGIN_COUNTS[worker]), worker
        assert list(HONEST_EXP_COUNTS[worker]) == cal["toploc_exp_mismatches"], worker


def test_llr_table_is_a_likelihood_ratio_of_mean_one_under_the_honest_model():
    for comp in DEFAULT_RULES.components:
        for cls, p in comp.honest.items():
            table = comp.llr_table(cls)
            assert table[0] < 0  # an exact observation is evidence of honesty
            assert sum(pi * math.exp(t) for pi, t in zip(p, table, strict=True)) == pytest.approx(1.0, abs=1e-9)
    assert DEFAULT_RULES.threshold == pytest.approx(math.log(DEFAULT_RULES.horizon / DEFAULT_RULES.false_alarm))


def test_rules_validate_and_roundtrip():
    js = DEFAULT_RULES.model_dump_json(by_alias=True)
    assert json.loads(js)["schema"] == "intellect.evidence-rules/v1"
    back = EvidenceRules.model_validate_json(js)
    assert back.digest() == DEFAULT_RULES.digest()
    with pytest.raises(ValueError, match="increasing"):
        Component(name="replay_margin", edges=(0.0, 0.0), weight=0.1, alternative=(0.0, 1.0), honest={})
    with pytest.raises(ValueError, match="default class"):
        default_rules(default_class="tpu-int4")
    assert rules_for_profile("fp32").default_class == "cpu-fp32"
    assert rules_for_profile("reference").default_class == rules_for_profile("mixed").default_class == "cpu-bf16"
    assert len(MARGIN_EDGES) == len(EXP_EDGES) == 9


def test_four_bit_copy_proven_with_the_real_model_is_flagged_within_its_history():
    """The 4-bit copy passes `mixed` per submission; over its history it is flagged (runs of 20 at most)."""
    llrs = _llrs("4-bit copy, proven with the real model")
    assert len(llrs) >= 5
    rng = random.Random(35)
    runs = [_until_flagged(llrs, DEFAULT_RULES, rng, 20) for _ in range(200)]
    assert all(r is not None for r in runs), runs


def test_full_budget_steerer_is_flagged_within_ten_submissions():
    llrs = _llrs("steering at the full budget")
    assert llrs, "no full-budget steering submission passed `mixed`"
    rng = random.Random(36)
    runs = [_until_flagged(llrs, DEFAULT_RULES, rng, 10) for _ in range(200)]
    assert all(r is not None for r in runs), runs


@pytest.mark.parametrize("pair", ["cpu-bf16", "cpu-fp32"])
def test_honest_worker_is_never_flagged(pair):
    """The held-out honest submissions, in order and then 5,000 drawn at random: no flag, none ambiguous."""
    llrs = _llrs(f"honest {pair}", passing=False)
    assert llrs and all(s["mixed_ok"] for s in DOC["cases"][f"honest {pair}"])
    assert max(llrs) < DEFAULT_RULES.ambiguous_llr
    ev = WorkerEvidence(worker="0x" + "22" * 20, compute_class="cpu-bf16")
    rng = random.Random(37)
    for i in range(5000):
        assert not ev.add(i, llrs[i] if i < len(llrs) else rng.choice(llrs), DEFAULT_RULES), i
    assert ev.statistic < DEFAULT_RULES.threshold


def test_claim_recheck_upholds_the_cited_run_and_refuses_cherry_picking():
    llrs = _llrs("4-bit copy, proven with the real model")
    honest = _llrs("honest cpu-bf16")
    ev = WorkerEvidence(worker="0x" + "33" * 20, compute_class="cpu-bf16")
    sids = list(range(100, 106))
    values = [honest[0], llrs[0], llrs[1 % len(llrs)], llrs[2 % len(llrs)], honest[1], honest[2]]
    for sid, x in zip(sids, values, strict=True):
        ev.add(sid, x, DEFAULT_RULES, rollouts_cid=f"bafy{sid}")
    assert ev.flagged
    claim = ev.claim(DEFAULT_RULES)
    cited = [c.submission_id for c in claim.cited]
    assert cited == sids[1:4] and claim.statistic >= DEFAULT_RULES.threshold
    llr_of = dict(zip(sids, values, strict=True))
    assert recheck_claim(claim, DEFAULT_RULES, sids, llr_of)[0]
    # the voter's own LLRs are what count: a claimant that inflates its numbers gets nothing from it
    low = {s: -1.0 for s in sids}
    assert not recheck_claim(claim, DEFAULT_RULES, sids, low)[0]
    # a run with a hole in it (an honest submission left out) is refused
    holed = claim.model_copy(update={"cited": (claim.cited[0], claim.cited[2])})
    ok, why = recheck_claim(holed, DEFAULT_RULES, sids, llr_of)
    assert not ok and "leaves out" in why
    # other rules: refused
    other = default_rules(false_alarm=1e-6)
    assert not recheck_claim(claim, other, sids, llr_of)[0]


def test_late_submission_is_inserted_in_id_order():
    ev = WorkerEvidence(worker="0x" + "44" * 20, compute_class="cpu-bf16")
    for sid, x in ((1, 5.0), (3, 5.0), (2, 10.0)):
        ev.add(sid, x, DEFAULT_RULES)
    assert [c.submission_id for c in ev.history] == [1, 2, 3]
    assert ev.statistic == pytest.approx(20.0) and ev.flagged
    assert not ev.add(2, 10.0, DEFAULT_RULES) or ev.submissions == 3  # a repeat is not counted twice
    assert ev.submissions == 3


def test_verdict_three_way_keeps_old_callers_working():
    old = Verdict(submission_id=1, accepted=False, reason="bad_file")
    assert old.outcome == "reject" and old.slashable
    ok = Verdict(submission_id=2, accepted=True)
    assert ok.outcome == "accept" and not ok.slashable
    amb = Verdict(submission_id=3, accepted=False, outcome="ambiguous", reason="evidence_high", llr=9.0)
    assert not amb.accepted and not amb.slashable
    assert Verdict.model_validate(amb.model_dump()).outcome == "ambiguous"
    with pytest.raises(ValueError, match="outcome"):
        Verdict(submission_id=4, accepted=True, outcome="ambiguous")


SMOLLM2 = Path(__file__).parent / "data" / "evidence_streams_smollm2.json"


@pytest.mark.parametrize("pair", ["cpu-bf16", "cpu-fp32"])
def test_default_stays_track_because_the_shipped_calibration_does_not_cover_smollm2(pair):
    """Why `validator.evidence` defaults to `track` (docs/benchmarks-verifier.md §1.3): the shipped honest histograms
    are the tiny model's CPU pairs, and MEASURED honest SmolLM2 submissions (`bench_evidence.py collect --models
    smollm2`, the held-out ones of the export: those after the 150 per pair SmolLM2's own rules calibrate on) judged by
    them, in order, flag an honest bf16 worker
    within a few submissions; an honest fp32 worker is not flagged. Enforcing these rules on a SmolLM2 pool would
    challenge honest bf16 workers, so the default must not enforce them."""
    from intellect.agents.config import ValidatorSettings

    doc = json.loads(SMOLLM2.read_text())
    subs = doc["cases"][f"honest {pair}"]
    assert all(s["mixed_ok"] for s in subs)  # every one passes its per-submission bounds
    llrs = [submission_llr(Observations(counts={k: tuple(v) for k, v in s["counts"].items()}), DEFAULT_RULES)
            for s in subs]
    ev = WorkerEvidence(worker="0x" + "55" * 20, compute_class="cpu-bf16")
    flagged = any(ev.add(i, x, DEFAULT_RULES) for i, x in enumerate(llrs))
    assert flagged == (pair == "cpu-bf16"), (pair, llrs)
    assert ValidatorSettings().evidence == "track"
    # under `track` an ambiguous verdict is attested, and under either mode it never slashes
    assert not Verdict(submission_id=1, accepted=False, outcome="ambiguous", reason="evidence_high", llr=9.0).slashable


SMOLLM2_RULES = Path(__file__).parents[2] / "bench" / "verifier" / "rules" / "smollm2-135m.json"


def _smollm2() -> tuple[dict, EvidenceRules]:
    return json.loads(SMOLLM2.read_text()), EvidenceRules.from_bytes(SMOLLM2_RULES.read_bytes(), source=str(SMOLLM2_RULES))


def test_smollm2_rules_are_its_measured_calibration_half():
    """The rules a SmolLM2 pool publishes (`pool create --evidence-rules bench/verifier/rules/smollm2-135m.json`) are
    the honest histograms of the first 150 measured submissions per pair, with δ = 2 % of tokens (`bench_evidence.py
    rules --margin-weight 0.02`); the test data hold the 150 per pair after them, out of sample."""
    doc, rules = _smollm2()
    pairs = ("cpu-bf16", "cpu-fp32")
    assert {w: doc["calibration"][w]["submissions"] for w in pairs} == {"cpu-bf16": 150, "cpu-fp32": 150}
    assert rules == default_rules({w: doc["calibration"][w]["replay_margin"] for w in pairs},
                                  {w: doc["calibration"][w]["toploc_exp_mismatches"] for w in pairs},
                                  default_class="cpu-bf16", margin_weight=0.02)
    assert rules.threshold == DEFAULT_RULES.threshold  # the same modelled false-alarm rate per worker-year


@pytest.mark.parametrize("pair", ["cpu-bf16", "cpu-fp32"])
def test_smollm2_rules_flag_no_held_out_honest_worker(pair):
    """Judged by SmolLM2's own rules (the pool default class, as a `mixed` pool judges everyone), the held-out honest
    submissions of either pair, in order: none ambiguous, the worker never flagged (by the tiny model's rules the
    bf16 one is: the test above)."""
    doc, rules = _smollm2()
    subs = doc["cases"][f"honest {pair}"]
    assert len(subs) >= 150 and all(s["mixed_ok"] for s in subs)
    llrs = [submission_llr(Observations(counts={k: tuple(v) for k, v in s["counts"].items()}), rules) for s in subs]
    assert max(llrs) < rules.ambiguous_llr
    ev = WorkerEvidence(worker="0x" + "57" * 20, compute_class="cpu-bf16")
    assert not any(ev.add(i, x, rules) for i, x in enumerate(llrs)), llrs


def test_smollm2_rules_catch_its_cheats():
    """SmolLM2's measured cheats (bf16 worker): every 4-bit-copy submission proven with the real model is rejected
    on its own (`mixed`); a worker steering at the full per-submission budget, judged only on the submissions that
    pass `mixed` (the others are rejected outright), is flagged within 10 submissions in every one of 1,000 drawn
    histories (fixed seed)."""
    doc, rules = _smollm2()
    four_bit = doc["cases"]["4-bit copy, proven with the real model"]
    assert four_bit and not any(s["mixed_ok"] for s in four_bit)
    steer = doc["cases"]["steering at the full budget"]
    passing = [submission_llr(Observations(counts={k: tuple(v) for k, v in s["counts"].items()}), rules)
               for s in steer if s["mixed_ok"]]
    assert len(passing) >= 5
    rng = random.Random(35)
    flagged_at = [_until_flagged(passing, rules, rng, 50) for _ in range(1000)]
    assert all(n is not None and n <= 10 for n in flagged_at), sorted(n or 99 for n in flagged_at)[-5:]
