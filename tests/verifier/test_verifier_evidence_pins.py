"""The evidence rules pinned exactly (issue 39, mutmut's survivors on `verifier/evidence.py`).

`DEFAULT_RULES` and `FP32_RULES` are built at import, before any mutant is active: the component arithmetic
(`from_counts`, `llr_table`, `default_rules`) is computed here inside the tests, on small hand-checked inputs, and
`observe` (otherwise reached only through `check_submission` with the model) on hand-made verification results.
docs/benchmarks-security.md ("mutmut") lists the mutants.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import pytest
from pydantic import ValidationError

from intellect.sdk import SchemaVersionError
from intellect.verifier.evidence import (
    CALIBRATION_SCHEMA,
    DEFAULT_RULES,
    EXP_EDGES,
    FP32_RULES,
    HONEST_EXP_COUNTS,
    HONEST_MARGIN_COUNTS,
    MARGIN_EDGES,
    MAX_RULES_BYTES,
    Cited,
    Component,
    EvidenceClaim,
    EvidenceRules,
    EvidenceRulesError,
    Observations,
    WorkerEvidence,
    default_rules,
    observe,
    recheck_claim,
    rules_for_profile,
    submission_llr,
)
from intellect.verifier.toploc import ChunkStats, ReplayStats, VerificationResult

WORKER = "0x" + "55" * 20


def _chunk(exp: int) -> ChunkStats:
    return ChunkStats(exp_mismatches=exp, mant_err_mean=0.0, mant_err_median=0.0)


def _replay(positions: int, margins: tuple[float, ...]) -> ReplayStats:
    return ReplayStats(
        max_margin=max(margins, default=0.0),
        mean_margin=0.0,
        flips=len(margins),
        positions=positions,
        margins=margins,
    )


def _toy(weight: float = 0.1) -> Component:
    return Component(
        name="replay_margin",
        edges=(0.0, 1.0),
        weight=weight,
        alternative=(0.0, 1.0),
        honest={"a": (0.5, 0.5), "b": (0.8, 0.2)},
    )


def _mismatches_known_to_a() -> Component:
    """A second component whose honest distribution only class `a` has."""
    return Component(
        name="toploc_exp_mismatches",
        edges=(0.0, 1.0),
        weight=0.1,
        alternative=(0.0, 1.0),
        honest={"a": (0.5, 0.5)},
    )


def test_observe_bins_every_replayed_token_and_every_chunk() -> None:
    """Tokens not listed in a sample's margins drew the replayed argmax (bin 0); each listed margin falls in the
    first bin whose edge it does not exceed (+inf in the last); every chunk's exponent mismatches likewise; a sample
    without a replay adds chunks only."""
    results = [
        VerificationResult(
            ok=True, chunks=[_chunk(0), _chunk(3), _chunk(40)], replay=_replay(5, (0.0005, 0.3, math.inf))
        ),
        VerificationResult(ok=True, chunks=[_chunk(1), _chunk(3)]),
        VerificationResult(ok=True, chunks=[], replay=_replay(2, ())),
        VerificationResult(ok=True, chunks=[_chunk(18)], replay=_replay(3, (1e-3, 1.0))),
    ]
    obs = observe(results, DEFAULT_RULES)
    assert obs.counts["replay_margin"] == (4 + 1, 1 + 1, 0, 0, 0, 0, 1, 1, 1)
    assert obs.counts["toploc_exp_mismatches"] == (1, 1, 0, 2, 0, 0, 1, 0, 1)
    assert sum(obs.counts["replay_margin"]) == 5 + 2 + 3
    only_margins = EvidenceRules(components=(DEFAULT_RULES.components[0],), default_class="cpu-bf16")
    assert observe(results, only_margins).counts == {"replay_margin": obs.counts["replay_margin"]}
    only_chunks = EvidenceRules(components=(DEFAULT_RULES.components[1],), default_class="cpu-bf16")
    assert observe(results, only_chunks).counts == {
        "toploc_exp_mismatches": obs.counts["toploc_exp_mismatches"]
    }


def test_bin_is_the_first_edge_not_exceeded_and_nan_the_last() -> None:
    comp = DEFAULT_RULES.components[0]
    assert [comp.bin(v) for v in (0.0, 1e-3, 2e-3, 1.0, 1.5, 1e31, math.inf)] == [0, 1, 2, 7, 8, 8, 8]
    assert comp.bin(math.nan) == len(MARGIN_EDGES) - 1


def test_llr_table_is_ln_of_one_minus_delta_plus_delta_w_over_honest() -> None:
    comp = _toy(0.1)
    assert comp.llr_table("a") == pytest.approx((math.log(0.9), math.log(0.9 + 0.1 / 0.5)), abs=1e-15)
    assert comp.llr_table("b") == pytest.approx((math.log(0.9), math.log(0.9 + 0.1 / 0.2)), abs=1e-15)


def test_from_counts_adds_one_inflates_the_non_exact_bins_floors_and_normalises() -> None:
    """Counts (8, 0, 1): (k + 1) / 12 = 0.75, 1/12, 2/12; the non-exact bins × 2 → 0.75, 1/6, 1/3, normalised by
    1.25 → 0.6, 2/15, 4/15. A floor of 0.2 lifts 1/6 first: 0.75, 0.2, 1/3 over 1.2833. The cheat shape defaults to
    uniform over the non-exact bins; the counts are kept."""
    comp = Component.from_counts("replay_margin", (0.0, 1.0, 2.0), {"c": (8, 0, 1)}, 0.05)
    assert comp.honest["c"] == pytest.approx((0.6, 2 / 15, 4 / 15), abs=1e-12)
    assert comp.alternative == (0.0, 0.5, 0.5) and comp.weight == 0.05 and comp.counts == {"c": (8, 0, 1)}
    assert comp.edges == (0.0, 1.0, 2.0) and comp.name == "replay_margin"
    floored = Component.from_counts("replay_margin", (0.0, 1.0, 2.0), {"c": (8, 0, 1)}, 0.05, floor=0.2)
    z = 0.75 + 0.2 + 1 / 3
    assert floored.honest["c"] == pytest.approx((0.75 / z, 0.2 / z, (1 / 3) / z), abs=1e-12)
    flat = Component.from_counts("replay_margin", (0.0, 1.0, 2.0), {"c": (8, 0, 1)}, 0.05, inflate=1.0)
    assert flat.honest["c"] == pytest.approx((0.75, 1 / 12, 2 / 12), abs=1e-12)
    chosen = Component.from_counts(
        "replay_margin", (0.0, 1.0, 2.0), {"c": (8, 0, 1)}, 0.05, alternative=(0, 0, 1)
    )
    assert chosen.alternative == (0.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("component replay_margin, class c: 2 counts for 3 bins")):
        Component.from_counts("replay_margin", (0.0, 1.0, 2.0), {"c": (8, 0)}, 0.05)


def test_default_rules_are_the_shipped_counts_with_the_documented_weights() -> None:
    """δ = 1 % for the replay margins, 5 % for the exponent mismatches, the shipped counts, `cpu-bf16` judged by
    default; `FP32_RULES` the same judged as `cpu-fp32`; other counts and settings are passed through."""
    rules = default_rules()
    margin, exp = rules.components
    assert (margin.name, margin.edges, margin.weight) == ("replay_margin", MARGIN_EDGES, 0.01)
    assert (exp.name, exp.edges, exp.weight) == ("toploc_exp_mismatches", EXP_EDGES, 0.05)
    assert margin.counts == HONEST_MARGIN_COUNTS and exp.counts == HONEST_EXP_COUNTS
    assert rules.default_class == "cpu-bf16" and rules == DEFAULT_RULES
    assert default_rules(default_class="cpu-fp32") == FP32_RULES
    custom = default_rules(
        {"x": (1,) * 9}, {"x": (2,) * 9}, default_class="x", margin_weight=0.02, exp_weight=0.1, horizon=10
    )
    assert custom.components[0].counts == {"x": (1,) * 9} and custom.components[1].counts == {"x": (2,) * 9}
    assert (custom.components[0].weight, custom.components[1].weight, custom.horizon) == (0.02, 0.1, 10)


def test_rules_for_profile_maps_fp32_to_fp32_rules_and_refuses_an_unknown_profile() -> None:
    assert rules_for_profile("fp32") is FP32_RULES
    assert rules_for_profile("mixed") is DEFAULT_RULES and rules_for_profile("reference") is DEFAULT_RULES
    with pytest.raises(ValueError, match=re.escape("unknown verification profile 'bf16'")):
        rules_for_profile("bf16")


def test_judged_class_is_the_declaration_only_when_every_component_knows_it() -> None:
    half = _mismatches_known_to_a()
    rules = EvidenceRules(components=(_toy(), half), default_class="a")
    assert rules.classes() == ["a"]
    assert rules.judged_class("a") == "a"
    assert rules.judged_class("b") == "a"  # only one component knows b
    assert rules.judged_class(None) == "a" and rules.judged_class("zz") == "a"
    assert EvidenceRules(components=(_toy(),), default_class="b").classes() == ["a", "b"]


def test_digest_is_sha256_of_the_canonical_json() -> None:
    rules = default_rules(false_alarm=1e-4)
    # canonical: sorted keys, no spaces (the same rules give the same digest whatever order their classes came in)
    canonical = json.dumps(
        rules.model_dump(mode="json", by_alias=True), sort_keys=True, separators=(",", ":")
    )
    want = "0x" + hashlib.sha256(canonical.encode()).hexdigest()
    assert rules.digest() == want and rules.digest() != DEFAULT_RULES.digest()
    assert (
        rules.to_bytes() == canonical.encode()
        and b'"schema":"intellect.evidence-rules/v1"' in rules.to_bytes()
    )


def test_submission_llr_sums_count_times_table_and_refuses_a_wrong_bin_count() -> None:
    rules = EvidenceRules(components=(_toy(0.1),), default_class="a")
    obs = Observations(counts={"replay_margin": (3, 2)})
    assert submission_llr(obs, rules) == pytest.approx(3 * math.log(0.9) + 2 * math.log(1.1), abs=1e-12)
    assert submission_llr(obs, rules, "b") == pytest.approx(3 * math.log(0.9) + 2 * math.log(1.4), abs=1e-12)
    assert submission_llr(Observations(counts={}), rules) == 0.0  # no observation of the component
    with pytest.raises(ValueError, match=re.escape("observations of replay_margin have 3 bins, the rules 2")):
        submission_llr(Observations(counts={"replay_margin": (1, 2, 3)}), rules)


def test_cusum_restarts_at_zero_after_a_negative_run_and_a_flag_stays() -> None:
    """In order: S = max(0, S + L). −10 then +5: S = 5 (not −5); a flag, once raised, stays while S falls."""
    rules = default_rules(horizon=1, false_alarm=0.5)  # h = ln 2
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    assert not ev.add(1, -10.0, rules) and ev.statistic == 0.0
    assert not ev.add(2, 0.5, rules) and ev.statistic == 0.5
    assert ev.add(3, 0.2, rules) and ev.statistic == pytest.approx(0.7)  # 0.7 ≥ ln 2 = 0.693
    assert ev.add(4, -5.0, rules) and ev.statistic == 0.0 and ev.flagged
    assert ev.submissions == 4 and [c.submission_id for c in ev.history] == [1, 2, 3, 4]
    assert ev.history[1] == Cited(submission_id=2, rollouts_cid="", llr=0.5)


def test_a_late_submission_recomputes_the_statistic_and_the_flag() -> None:
    rules = default_rules(horizon=1, false_alarm=0.5)  # h = ln 2 ≈ 0.693
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    ev.add(1, 0.4, rules)
    ev.add(3, -0.1, rules)
    assert not ev.flagged and ev.statistic == pytest.approx(0.3)
    assert ev.add(2, 0.4, rules, rollouts_cid="bafy2")  # 0.4 + 0.4 = 0.8 ≥ h, the run 1..2
    assert ev.statistic == pytest.approx(0.7) and ev.submissions == 3
    assert [c.rollouts_cid for c in ev.history] == ["", "bafy2", ""]
    run, s = ev.cited()
    assert [c.submission_id for c in run] == [1, 2] and s == pytest.approx(0.8)
    low = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    low.add(1, 0.1, rules)
    low.add(3, 0.1, rules)
    assert not low.add(2, 0.1, rules) and not low.flagged  # 0.3 < h


def test_history_keeps_the_last_max_history_and_the_flag_follows_what_is_kept() -> None:
    rules = default_rules(horizon=1, false_alarm=0.5, max_history=3)  # h = ln 2
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, 1.0), (2, -2.0), (3, 0.1), (4, 0.1)):
        ev.add(sid, x, rules)
    assert [c.submission_id for c in ev.history] == [2, 3, 4]
    assert not ev.flagged  # the flagging run (submission 1) is no longer held: nothing to cite
    assert ev.submissions == 4
    assert ev.add(2, 5.0, rules) is False and ev.submissions == 4  # a repeat is not counted


def test_best_run_restarts_after_a_non_positive_sum() -> None:
    """The cited run is the consecutive run of largest sum (Kadane): 3, −5, 4, 1 cites 4, 1 (sum 5)."""
    rules = default_rules()
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, 3.0), (2, -5.0), (3, 4.0), (4, 1.0)):
        ev.add(sid, x, rules)
    run, s = ev.cited()
    assert [c.submission_id for c in run] == [3, 4] and s == 5.0
    tie = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, 2.0), (2, -2.0), (3, 2.0)):
        tie.add(sid, x, rules)
    run, s = tie.cited()
    assert [c.submission_id for c in run] == [1] and s == 2.0  # the first run of the largest sum


def test_no_positive_evidence_cites_nothing_and_makes_no_claim() -> None:
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    assert ev.cited() == ([], 0.0)
    ev.add(1, -1.0, DEFAULT_RULES)
    assert ev.cited() == ([], 0.0)
    with pytest.raises(ValueError, match=re.escape(f"worker {WORKER} has no evidence to cite")):
        ev.claim(DEFAULT_RULES)


def test_claim_carries_the_worker_rules_class_run_and_threshold() -> None:
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-fp32")
    ev.add(7, 2.0, DEFAULT_RULES, rollouts_cid="bafy7")
    claim = ev.claim(DEFAULT_RULES)
    assert claim == EvidenceClaim(
        worker=WORKER,
        rules=DEFAULT_RULES.digest(),
        compute_class="cpu-fp32",
        cited=(Cited(submission_id=7, rollouts_cid="bafy7", llr=2.0),),
        statistic=2.0,
        threshold=DEFAULT_RULES.threshold,
    )


def _claim(ids: list[int], rules: EvidenceRules = DEFAULT_RULES) -> EvidenceClaim:
    return EvidenceClaim(
        worker=WORKER,
        rules=rules.digest(),
        compute_class="cpu-bf16",
        cited=tuple(Cited(submission_id=i, llr=1.0) for i in ids),
        statistic=1.0,
        threshold=rules.threshold,
    )


def test_recheck_claim_at_the_threshold_and_its_refusals_named() -> None:
    """Upheld at h exactly and within the tolerance 1e-6 under it, refused 1e-5 under; a submission cited twice, a
    cited one the voter has no LLR of, other rules: each refused with its reason."""
    rules = DEFAULT_RULES
    h = rules.threshold
    ok, why = recheck_claim(_claim([1, 2]), rules, [1, 2], {1: h / 2, 2: h / 2})
    assert ok and why == f"2 consecutive submissions, LLR sum {h:.2f} ≥ h = {h:.2f}"
    assert recheck_claim(_claim([1, 2]), rules, [1, 2], {1: h / 2, 2: h / 2 - 5e-7})[0]
    ok, why = recheck_claim(_claim([1, 2]), rules, [1, 2], {1: h / 2, 2: h / 2 - 1e-5})
    assert not ok and why == f"the cited submissions' LLRs sum to {h - 1e-5:.2f} < h = {h:.2f}"
    assert recheck_claim(_claim([1, 2]), rules, [1, 2], {1: h / 2, 2: h / 2 - 1e-5}, tolerance=1e-4)[0]
    ok, why = recheck_claim(_claim([1, 1]), rules, [1], {1: h})
    assert (ok, why) == (False, "the claim cites a submission twice")
    ok, why = recheck_claim(_claim([1, 2]), rules, [1, 2], {1: h})
    assert (ok, why) == (False, "no LLR of the cited submissions [2] (not the worker's, or not checkable)")
    ok, why = recheck_claim(_claim([1, 3]), rules, [1, 2, 3, 4], {1: h, 3: h})
    assert (ok, why) == (False, "the cited run leaves out the worker's submissions [2]")
    assert recheck_claim(_claim([2, 3]), rules, [1, 2, 3, 4], {2: h, 3: h})[0]  # 1 and 4 lie outside the run
    other = default_rules(false_alarm=1e-6)
    ok, why = recheck_claim(_claim([1]), other, [1], {1: 100.0})
    assert (ok, why) == (
        False,
        f"the claim was computed under rules {DEFAULT_RULES.digest()}, this pool's are {other.digest()}",
    )


def test_submission_llr_counts_every_component_the_observations_have() -> None:
    """Observations without the first component's counts still count the second's."""
    second = _mismatches_known_to_a()
    rules = EvidenceRules(components=(_toy(0.1), second), default_class="a")
    obs = Observations(counts={"toploc_exp_mismatches": (0, 2)})
    assert submission_llr(obs, rules) == pytest.approx(2 * math.log(1.1), abs=1e-12)


def test_a_worker_is_flagged_at_exactly_h_in_order_late_and_after_trimming() -> None:
    """The flag is S ≥ h: a run summing to h exactly flags, whether it arrives in order, late (recomputed), or is
    what the kept history holds after trimming to `max_history` (a flagging run still held keeps the flag)."""
    rules = default_rules(max_history=2)
    h = rules.threshold
    in_order = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    assert in_order.add(1, h, rules) and in_order.statistic == h
    late = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    assert not late.add(2, -1.0, rules)
    assert late.add(1, h, rules)  # inserted before 2: the run [1] sums to h
    kept = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, -1.0), (2, -1.0), (3, h)):
        kept.add(sid, x, rules)
    assert [c.submission_id for c in kept.history] == [2, 3] and kept.flagged
    trimmed_at_h = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, -1.0), (2, h), (3, -2.0)):
        trimmed_at_h.add(sid, x, rules)
    assert [c.submission_id for c in trimmed_at_h.history] == [2, 3] and trimmed_at_h.flagged


def test_a_run_with_a_zero_sum_prefix_is_cited_without_it_and_a_zero_llr_cites_nothing() -> None:
    """3 submissions 1, −1, 2: the cited run is [2] alone (a prefix summing to 0 adds nothing to the claim);
    a history whose best sum is 0 has no run to cite."""
    rules = default_rules()
    ev = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    for sid, x in ((1, 1.0), (2, -1.0), (3, 2.0)):
        ev.add(sid, x, rules)
    run, s = ev.cited()
    assert [c.submission_id for c in run] == [3] and s == 2.0
    zero = WorkerEvidence(worker=WORKER, compute_class="cpu-bf16")
    zero.add(1, 0.0, rules)
    assert zero.cited() == ([], 0.0)


def test_recheck_claim_lists_at_most_ten_ids_and_upholds_a_sum_of_exactly_h() -> None:
    rules = DEFAULT_RULES
    h = rules.threshold
    ok, why = recheck_claim(_claim([1, 20]), rules, range(1, 21), {1: h, 20: h})
    assert not ok and why == f"the cited run leaves out the worker's submissions {list(range(2, 12))}"
    ids = list(range(1, 13))
    ok, why = recheck_claim(_claim(ids), rules, ids, {1: h})
    assert (
        not ok
        and why
        == f"no LLR of the cited submissions {list(range(2, 12))} (not the worker's, or not checkable)"
    )
    assert recheck_claim(_claim([1]), rules, [1], {1: h}, tolerance=0.0)[0]
    assert not recheck_claim(_claim([1]), rules, [1], {1: math.nextafter(h, 0.0)}, tolerance=0.0)[0]


# -- the published document (`to_bytes` / `from_bytes`, issue 35), pinned at its limits (issue 39, third pass) --


def test_rules_document_of_exactly_max_rules_bytes_is_read_one_more_byte_is_refused() -> None:
    """The size bound is inclusive: a document of exactly `MAX_RULES_BYTES` (the canonical bytes padded with JSON
    whitespace) is read; one byte more is refused before parsing."""
    data = DEFAULT_RULES.to_bytes()
    padded = data + b" " * (MAX_RULES_BYTES - len(data))
    assert len(padded) == MAX_RULES_BYTES
    assert EvidenceRules.from_bytes(padded) == DEFAULT_RULES
    with pytest.raises(EvidenceRulesError) as err:
        EvidenceRules.from_bytes(padded + b" ", source="pool 3")
    assert str(err.value) == (
        f"pool 3: {MAX_RULES_BYTES + 1} bytes, over the {MAX_RULES_BYTES} an evidence-rules document may have"
    )


def test_rules_document_errors_name_the_default_source_evidence_rules() -> None:
    with pytest.raises(EvidenceRulesError) as err:
        EvidenceRules.from_bytes(b"[1]")
    assert str(err.value) == "evidence rules: an evidence-rules document is a JSON object, got list"


def test_rules_document_of_another_schema_names_source_found_schema_cut_at_80_and_the_one_read() -> None:
    doc = json.loads(DEFAULT_RULES.to_bytes())
    doc["schema"] = "intellect.evidence-rules/v2" + "x" * 100
    with pytest.raises(SchemaVersionError) as err:
        EvidenceRules.from_bytes(json.dumps(doc).encode(), source="pool 3's evidence rules")
    assert err.value.what == "pool 3's evidence rules"
    assert err.value.found == doc["schema"][:80] and len(err.value.found) == 80
    assert err.value.expected == CALIBRATION_SCHEMA == "intellect.evidence-rules/v1"


def test_rules_document_validation_error_is_cut_at_600_characters() -> None:
    """A document that breaks the rules' constraints: `source: ` and the first 600 characters of pydantic's
    message (30 unknown fields: a message over 600 characters)."""
    doc = json.loads(DEFAULT_RULES.to_bytes())
    doc.update({f"surprise_{i}": i for i in range(30)})
    with pytest.raises(ValidationError) as direct:
        EvidenceRules.model_validate(doc)
    full = str(direct.value)
    assert len(full) > 601
    with pytest.raises(EvidenceRulesError) as err:
        EvidenceRules.from_bytes(json.dumps(doc).encode(), source="S")
    assert str(err.value) == "S: " + full[:600]


def test_rules_with_a_non_finite_number_are_refused_and_have_no_document() -> None:
    """JSON has no infinity: the models refuse a non-finite number (an infinite last edge, an infinite ambiguity
    bound), naming the field, so a pool cannot build rules it could never publish; and rules built around the
    checks (`model_copy(update=...)` does not validate) still make `to_bytes` and `digest` raise instead of writing `Infinity`, which no
    reader takes."""
    with pytest.raises(ValidationError, match=r"edges\.2\n  Input should be a finite number"):
        Component.from_counts("replay_margin", (0.0, 1.0, math.inf), {"c": (5, 1, 0)}, 0.01)
    with pytest.raises(ValidationError, match="ambiguous_llr\n  Input should be a finite number"):
        EvidenceRules.model_validate({**json.loads(DEFAULT_RULES.to_bytes()), "ambiguous_llr": math.inf})
    with pytest.raises(ValidationError, match="weight\n  Input should be a finite number"):
        Component.model_validate({**DEFAULT_RULES.components[0].model_dump(), "weight": math.nan})
    unchecked = DEFAULT_RULES.model_copy(update={"ambiguous_llr": math.inf})
    with pytest.raises(ValueError, match="not JSON compliant"):
        unchecked.to_bytes()
    with pytest.raises(ValueError, match="not JSON compliant"):
        unchecked.digest()
