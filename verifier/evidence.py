"""Evidence that accumulates per worker (issue 35): a sequential test over every token a worker submits.

Each submission is judged alone by `check_submission` (TOPLOC bounds, the seeded sampler's per-token tolerance,
the per-submission budget of differing tokens). A worker that runs a cheaper copy of the model, or steers a few
tokens per submission inside that budget, stays inside every per-submission bound: its flips look like honest
floating-point noise with bad luck. Over its history they do not. This module turns what the replay already
computes into a log-likelihood ratio per submission and tests it sequentially over the worker's history:

observations (no model work: the validator's replay and TOPLOC check computed them)
    `replay_margin`          per completion token: max_j score_j − score_token (0 for the replayed draw)
    `toploc_exp_mismatches`  per proof chunk: exponent mismatches of its 128 top values

log-likelihood ratio (per observation, summed per submission)
    each observation falls in a bin of its component; the honest probability of bin b for the worker's compute
    class is `honest[b]` (calibrated, smoothed upwards: `Component.from_counts`); the cheat alternative is the
    mixture (1 − δ)·honest + δ·w (a share δ of the observations drawn from the shape w instead), so
        llr(b) = ln(1 − δ + δ · w[b] / honest[b])
    An exact token (bin 0, w = 0) gives ln(1 − δ) < 0: every token a worker gets right pulls its evidence down.
    Under the honest distribution the likelihood ratio has expectation 1 per observation (whatever δ and w).

the sequential test (Page's CUSUM over the worker's submissions in id order)
    S_n = max(0, S_{n-1} + L_n); flagged when some run of consecutive submissions sums to ≥ h, with
        h = ln(horizon / false_alarm)
    For an honest worker each run's likelihood ratio is a non-negative martingale of mean 1, so by Ville's
    inequality a run starting at a given submission ever reaches e^h with probability ≤ e^−h; over the
    `horizon` possible starts of a worker's history the chance of a false flag is ≤ horizon · e^−h =
    `false_alarm`. This holds exactly when the honest model is the truth; the calibration's counts are
    smoothed upwards in every non-exact bin (a conservative honest model) so that a pair a little noisier than
    measured still drifts down. Token dependence inside a completion is the model's known approximation: the
    honest benches (docs/benchmarks-verifier.md §1.3) measure the false-flag rate directly.

a verifiable flag
    `WorkerEvidence.cited()` is the run of consecutive submissions (their ids, CIDs and LLRs) whose sum is
    largest; any validator recomputes every cited submission's LLR from its rollout file on IPFS and the chain
    records (the same replay), checks that the run holds every one of the worker's submissions between its first
    and last id, and that the sum reaches h (`recheck_claim`). `EvidenceClaim` is what a challenge carries.

the three-way verdict (`check_submission`): a submission that passes every bound but whose own LLR reaches
`EvidenceRules.ambiguous_llr` (an honest one does with probability ≤ e^−ambiguous_llr, Markov) is `ambiguous`:
no attestation, no challenge, not trained on; its LLR joins the worker's evidence.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from intellect.sdk import ConfigError, SchemaVersionError
from intellect.verifier.toploc import PROFILE_ALIASES, PROFILES, ChunkStats, VerificationResult

__all__ = [
    "CALIBRATION_SCHEMA",
    "CLAIM_SCHEMA",
    "DEFAULT_RULES",
    "FP32_RULES",
    "MAX_RULES_BYTES",
    "Cited",
    "Component",
    "EvidenceClaim",
    "EvidenceRules",
    "EvidenceRulesError",
    "Observations",
    "WorkerEvidence",
    "default_rules",
    "observe",
    "recheck_claim",
    "rules_for_profile",
    "submission_llr",
]

CALIBRATION_SCHEMA = "intellect.evidence-rules/v1"
CLAIM_SCHEMA = "intellect.evidence-claim/v1"
MAX_RULES_BYTES = 256 * 1024
"""Largest evidence-rules document read (the shipped ones are ~3 KB); a pool's names it by CID (`PoolRules`)."""


class EvidenceRulesError(ConfigError):
    """An evidence-rules document that is too large, not JSON, or breaks the rules' own constraints."""

ComponentName = Literal["replay_margin", "toploc_exp_mismatches"]

MARGIN_EDGES = (0.0, 1e-3, 1e-2, 0.05, 0.1, 0.25, 0.5, 1.0, 1e30)
"""Upper edges of the replay-margin bins (a value v falls in the first bin with v ≤ edge): exact draw, then ties
(≤ 0.25, not counted by the per-submission budget) and differing tokens up to the `mixed` tolerance (1.0); the last edge is finite (JSON has no inf): anything above it,
+inf included, falls in the last bin."""
EXP_EDGES = (0.0, 1.0, 2.0, 4.0, 8.0, 12.0, 18.0, 32.0, 1e30)
"""Upper edges of the per-chunk exponent-mismatch bins (of 128 top values; `mixed` allows 18, `fp32` 4)."""


class Component(BaseModel):
    """One kind of observation: its bins, the honest probability of each bin per compute class, the cheat shape."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)  # what to_bytes can write

    name: ComponentName
    edges: tuple[float, ...]
    """upper bin edges, increasing; a value falls in the first bin whose edge it does not exceed"""
    weight: float = Field(gt=0, lt=1)
    """δ: the share of a cheat's observations drawn from `alternative` (the smallest effect the test is built for)"""
    alternative: tuple[float, ...]
    """w: the cheat's shape over the bins (sums to 1; 0 on the exact bin)"""
    honest: dict[str, tuple[float, ...]]
    """compute class → honest probability per bin (sums to 1, every bin > 0)"""
    counts: dict[str, tuple[int, ...]] = Field(default_factory=dict)
    """compute class → the measured counts the honest probabilities were smoothed from (for the record)"""

    @model_validator(mode="after")
    def _shapes(self) -> Component:
        n = len(self.edges)
        if n < 2 or any(b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)):
            raise ValueError(f"component {self.name}: edges must be increasing, got {self.edges}")
        if len(self.alternative) != n or abs(sum(self.alternative) - 1) > 1e-6 or min(self.alternative) < 0:
            raise ValueError(f"component {self.name}: alternative must be {n} probabilities summing to 1")
        for cls, p in self.honest.items():
            if len(p) != n or abs(sum(p) - 1) > 1e-6 or min(p) <= 0:
                raise ValueError(f"component {self.name}, class {cls}: honest must be {n} positive probabilities "
                                 "summing to 1")
        return self

    def bin(self, value: float) -> int:
        """The bin of one observation (NaN counts as the last bin)."""
        if value != value:  # NaN
            return len(self.edges) - 1
        return min(bisect.bisect_left(self.edges, value), len(self.edges) - 1)

    def llr_table(self, cls: str) -> tuple[float, ...]:
        """ln(1 − δ + δ · w[b] / honest[b]) per bin for compute class `cls`."""
        p = self.honest[cls]
        d = self.weight
        return tuple(math.log(1 - d + d * w / h) for w, h in zip(self.alternative, p, strict=True))

    @classmethod
    def from_counts(cls, name: ComponentName, edges: Sequence[float], counts: Mapping[str, Sequence[int]],
                    weight: float, alternative: Sequence[float] | None = None, floor: float = 1e-5,
                    inflate: float = 2.0) -> Component:
        """A component whose honest probabilities come from measured counts, made conservative: every bin gets
        count + 1 (no bin is impossible), the non-exact bins (b ≥ 1) are multiplied by `inflate`, each bin is at least
        `floor`, and the whole is normalised. The cheat shape defaults to uniform over the non-exact bins."""
        n = len(edges)
        alt = tuple(alternative) if alternative is not None else (0.0,) + (1.0 / (n - 1),) * (n - 1)
        honest: dict[str, tuple[float, ...]] = {}
        for c, cnt in counts.items():
            if len(cnt) != n:
                raise ValueError(f"component {name}, class {c}: {len(cnt)} counts for {n} bins")
            total = sum(cnt) + n
            p = [(k + 1) / total * (1.0 if b == 0 else inflate) for b, k in enumerate(cnt)]
            p = [max(floor, x) for x in p]
            z = sum(p)
            honest[c] = tuple(x / z for x in p)
        return cls(name=name, edges=tuple(float(e) for e in edges), weight=weight, alternative=alt, honest=honest,
                   counts={c: tuple(int(k) for k in v) for c, v in counts.items()})


class EvidenceRules(BaseModel):
    """A pool's evidence rules: the components, the thresholds and the false-alarm rate they are set for.

    Versioned (`schema`): it goes into pool rules documents and every evidence claim cites its hash (`digest`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)

    schema_: Literal["intellect.evidence-rules/v1"] = Field(CALIBRATION_SCHEMA, alias="schema")
    components: tuple[Component, ...]
    default_class: str
    """the compute class a worker is judged by when it declares none or one the pool does not list: the most
    tolerant class the pool admits (a cheater would declare it anyway)"""
    false_alarm: float = Field(1e-3, gt=0, lt=1)
    """the chance an honest worker is ever flagged over `horizon` submissions (modelled, see the module doc)"""
    horizon: int = Field(100_000, ge=1)
    """the submissions of one worker the false-alarm rate covers (≈ a worker-year at one submission per 5 min)"""
    ambiguous_llr: float = Field(math.log(1e3), gt=0)
    """a submission passing every bound with its own LLR ≥ this is `ambiguous` (honest: probability ≤ e^−this)"""
    max_history: int = Field(1_000, ge=1)
    """per worker, the last submissions whose LLRs a validator keeps (the longest run a claim can cite)"""

    @field_validator("components")
    @classmethod
    def _classes(cls, v: tuple[Component, ...]) -> tuple[Component, ...]:
        if not v:
            raise ValueError("evidence rules need at least one component")
        if len({c.name for c in v}) != len(v):
            raise ValueError("evidence rules name a component twice")
        return v

    @model_validator(mode="after")
    def _default_known(self) -> EvidenceRules:
        for c in self.components:
            if self.default_class not in c.honest:
                raise ValueError(f"component {c.name} has no honest distribution for the default class "
                                 f"{self.default_class!r}")
        return self

    @property
    def threshold(self) -> float:
        """h = ln(horizon / false_alarm): a run of consecutive submissions whose LLRs sum to h flags the worker."""
        return math.log(self.horizon / self.false_alarm)

    def classes(self) -> list[str]:
        return sorted(set.intersection(*(set(c.honest) for c in self.components)))

    def judged_class(self, declared: str | None) -> str:
        """The class a worker's evidence is judged by: its declaration when every component knows it, else the
        pool's default."""
        return declared if declared is not None and declared in self.classes() else self.default_class

    def digest(self) -> str:
        """sha256 of the canonical JSON: the rules a claim was computed under."""
        return "0x" + hashlib.sha256(self.to_bytes()).hexdigest()

    def to_bytes(self) -> bytes:
        """The canonical JSON document (sorted keys, no spaces: the same rules always give the same bytes, digest
        and CID, whatever order their classes were listed in): what a pool publishes and names in its rules."""
        doc = self.model_dump(mode="json", by_alias=True)
        return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "evidence rules") -> EvidenceRules:
        """Read a published document (`source` names it in errors): over `MAX_RULES_BYTES`, not JSON, NaN or
        infinite numbers, another schema, or rules that break their own constraints are refused by name."""
        if len(data) > MAX_RULES_BYTES:
            raise EvidenceRulesError(f"{source}: {len(data)} bytes, over the {MAX_RULES_BYTES} an evidence-rules "
                                     f"document may have")

        def no_constant(name: str) -> float:
            raise ValueError(f"{name} is not a number an evidence rule may hold")

        try:
            doc = json.loads(bytes(data).decode("utf-8"), parse_constant=no_constant)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise EvidenceRulesError(f"{source}: not a JSON document: {exc}") from None
        if not isinstance(doc, dict):
            raise EvidenceRulesError(f"{source}: an evidence-rules document is a JSON object, got "
                                     f"{type(doc).__name__}")
        if doc.get("schema") != CALIBRATION_SCHEMA:
            raise SchemaVersionError(source, str(doc.get("schema"))[:80], CALIBRATION_SCHEMA)
        try:
            return cls.model_validate(doc)
        except ValueError as exc:  # pydantic's ValidationError is one
            raise EvidenceRulesError(f"{source}: {str(exc)[:600]}") from None


class Observations(BaseModel):
    """One submission's binned observations: component name → count per bin."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    counts: dict[str, tuple[int, ...]]


def observe(results: Iterable[VerificationResult], rules: EvidenceRules) -> Observations:
    """Bin a submission's per-sample results (`verify_samples`'s): every replayed token's margin (tokens not in
    `replay.margins` drew the replayed argmax: margin 0) and every chunk's exponent mismatches."""
    counts: dict[str, list[int]] = {c.name: [0] * len(c.edges) for c in rules.components}
    by_name = {c.name: c for c in rules.components}
    for r in results:
        if "replay_margin" in by_name and r.replay is not None:
            comp, cnt = by_name["replay_margin"], counts["replay_margin"]
            cnt[0] += r.replay.positions - len(r.replay.margins)
            for m in r.replay.margins:
                cnt[comp.bin(m)] += 1
        if "toploc_exp_mismatches" in by_name:
            comp, cnt = by_name["toploc_exp_mismatches"], counts["toploc_exp_mismatches"]
            for ch in r.chunks:
                cnt[comp.bin(float(_exp(ch)))] += 1
    return Observations(counts={k: tuple(v) for k, v in counts.items()})


def _exp(ch: ChunkStats) -> int:
    return ch.exp_mismatches


def submission_llr(obs: Observations, rules: EvidenceRules, compute_class: str | None = None) -> float:
    """Σ over the submission's observations of ln(alternative / honest) for the judged compute class."""
    cls = rules.judged_class(compute_class)
    total = 0.0
    for c in rules.components:
        cnt = obs.counts.get(c.name)
        if cnt is None:
            continue
        if len(cnt) != len(c.edges):
            raise ValueError(f"observations of {c.name} have {len(cnt)} bins, the rules {len(c.edges)}")
        total += sum(k * t for k, t in zip(cnt, c.llr_table(cls), strict=True))
    return total


class Cited(BaseModel):
    """One submission a claim cites: its id, its rollout file and the LLR the claimant computed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    submission_id: int = Field(ge=0)
    rollouts_cid: str = ""
    llr: float


class EvidenceClaim(BaseModel):
    """What a challenge of a flagged worker carries (in `Evidence.stats["evidence"]`, JSON on IPFS)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: Literal["intellect.evidence-claim/v1"] = Field(CLAIM_SCHEMA, alias="schema")
    worker: str
    rules: str
    """`EvidenceRules.digest()` of the rules the LLRs were computed under"""
    compute_class: str
    cited: tuple[Cited, ...] = Field(min_length=1)
    statistic: float
    threshold: float


class WorkerEvidence(BaseModel):
    """A worker's running evidence in one pool (kept in the validator's state store, so it survives restarts)."""

    model_config = ConfigDict(extra="forbid")

    worker: str
    compute_class: str
    history: list[Cited] = Field(default_factory=list)
    """the last `max_history` submissions judged (accepted or ambiguous), in id order"""
    statistic: float = 0.0
    """the CUSUM statistic: the largest sum of a run of consecutive submissions ending at the newest"""
    submissions: int = 0
    flagged: bool = False

    def add(self, submission_id: int, llr: float, rules: EvidenceRules, rollouts_cid: str = "") -> bool:
        """Record one submission's LLR (in id order; a late one is inserted in place and the statistic recomputed);
        True when the worker is flagged now: some run of consecutive submissions sums to ≥ h."""
        item = Cited(submission_id=submission_id, rollouts_cid=rollouts_cid, llr=float(llr))
        if any(c.submission_id == submission_id for c in self.history):
            return self.flagged
        self.submissions += 1
        if not self.history or submission_id > self.history[-1].submission_id:
            # in order (the usual case): the CUSUM step; a run reaching h first does so at its newest submission
            self.history.append(item)
            self.statistic = max(0.0, self.statistic + item.llr)
            self.flagged = self.flagged or self.statistic >= rules.threshold
        else:  # a late one: inserted in place, everything recomputed
            bisect.insort(self.history, item, key=lambda c: c.submission_id)
            self.statistic = _cusum(c.llr for c in self.history)
            best = _best_run(self.history)
            self.flagged = best is not None and best[2] >= rules.threshold
        if len(self.history) > rules.max_history:
            del self.history[: len(self.history) - rules.max_history]
            best = _best_run(self.history)
            self.flagged = best is not None and best[2] >= rules.threshold
        return self.flagged

    def cited(self) -> tuple[list[Cited], float]:
        """The run of consecutive submissions with the largest LLR sum (the one a claim cites) and that sum."""
        best = _best_run(self.history)
        if best is None:
            return [], 0.0
        i, j, s = best
        return list(self.history[i:j]), s

    def claim(self, rules: EvidenceRules) -> EvidenceClaim:
        run, s = self.cited()
        if not run:
            raise ValueError(f"worker {self.worker} has no evidence to cite")
        return EvidenceClaim(worker=self.worker, rules=rules.digest(), compute_class=self.compute_class,
                             cited=tuple(run), statistic=s, threshold=rules.threshold)


def _cusum(llrs: Iterable[float]) -> float:
    s = 0.0
    for x in llrs:
        s = max(0.0, s + x)
    return s


def _best_run(history: Sequence[Cited]) -> tuple[int, int, float] | None:
    """(start, end, sum) of the run of consecutive entries with the largest positive sum (Kadane), or None."""
    best: tuple[int, int, float] | None = None
    s, start = 0.0, 0
    for k, c in enumerate(history):
        if s <= 0:
            s, start = 0.0, k
        s += c.llr
        if s > 0 and (best is None or s > best[2]):
            best = (start, k + 1, s)
    return best


def recheck_claim(claim: EvidenceClaim, rules: EvidenceRules, worker_submissions: Iterable[int],
                  llr_of: Mapping[int, float], *, tolerance: float = 1e-6) -> tuple[bool, str]:
    """A voter's check of a claim: (uphold, why).

    `worker_submissions`: the ids of the worker's submissions in the pool that the voter knows (from the chain's
    `WorkSubmitted` events) and did not reject; `llr_of`: the voter's own LLR of each cited submission (from its
    state store, or recomputed from the rollout file). Upheld iff the claim is under these rules, cites a run
    holding every one of the worker's submissions between its first and last id, and the voter's own LLRs of the
    cited submissions sum to ≥ h.
    """
    if claim.rules != rules.digest():
        return False, f"the claim was computed under rules {claim.rules}, this pool's are {rules.digest()}"
    ids = [c.submission_id for c in claim.cited]
    if len(set(ids)) != len(ids):
        return False, "the claim cites a submission twice"
    lo, hi = min(ids), max(ids)
    missing = sorted(s for s in worker_submissions if lo <= s <= hi and s not in set(ids))
    if missing:
        return False, f"the cited run leaves out the worker's submissions {missing[:10]}"
    unknown = [s for s in ids if s not in llr_of]
    if unknown:
        return False, f"no LLR of the cited submissions {unknown[:10]} (not the worker's, or not checkable)"
    total = sum(llr_of[s] for s in ids)
    if total + tolerance < rules.threshold:
        return False, f"the cited submissions' LLRs sum to {total:.2f} < h = {rules.threshold:.2f}"
    return True, f"{len(ids)} consecutive submissions, LLR sum {total:.2f} ≥ h = {rules.threshold:.2f}"


# ---------------------------------------------------------------------------------------------
# the calibration shipped with the code (docs/benchmarks-verifier.md §1.3; `bench/verifier/bench_evidence.py`)

PUBLISHED_MARGIN_COUNTS: dict[str, tuple[int, ...]] = {
    # docs/benchmarks-verifier.md §1.2 (calibrate_pairs.py, 200 honest submissions per pair, the tiny model, CPU fp32
    # validator): fp32 worker 0 of 36,572 tokens off the replayed draw; bf16 worker 25 ties, all ≤ 0.004 (which of
    # the bins ≤ 1e-3 and ≤ 1e-2 each fell in was not recorded: counted in both, the conservative side)
    "cpu-fp32": (36572, 0, 0, 0, 0, 0, 0, 0, 0),
    "cpu-bf16": (36547, 25, 25, 0, 0, 0, 0, 0, 0),
}
BENCH_MARGIN_COUNTS: dict[str, tuple[int, ...]] = {
    # the calibration half of `bench/verifier/bench_evidence.py collect` (tests/verifier/data/evidence_streams.json)
    "cpu-fp32": (93842, 0, 0, 0, 0, 0, 0, 0, 0),
    "cpu-bf16": (93776, 39, 27, 0, 0, 0, 0, 0, 0),
}
HONEST_MARGIN_COUNTS: dict[str, tuple[int, ...]] = {
    c: tuple(a + b for a, b in zip(PUBLISHED_MARGIN_COUNTS[c], BENCH_MARGIN_COUNTS[c], strict=True))
    for c in PUBLISHED_MARGIN_COUNTS}
"""Honest tokens per replay-margin bin (`MARGIN_EDGES`), by compute class: §1.2's run plus this bench's half."""
HONEST_EXP_COUNTS: dict[str, tuple[int, ...]] = {
    # chunks per exponent-mismatch bin (`EXP_EDGES`): the calibration half of `bench_evidence.py collect`
    "cpu-fp32": (4932, 3, 1, 0, 0, 0, 0, 0, 0),
    "cpu-bf16": (473, 1682, 1550, 1097, 134, 0, 0, 0, 0),
}


def default_rules(margin_counts: Mapping[str, Sequence[int]] | None = None,
                  exp_counts: Mapping[str, Sequence[int]] | None = None, *, default_class: str = "cpu-bf16",
                  margin_weight: float = 0.01, exp_weight: float = 0.05, **kw: float | int) -> EvidenceRules:
    """Rules from measured honest counts (the shipped ones by default): δ = 1 % of tokens for the replay margins,
    5 % of chunks for TOPLOC's exponent mismatches."""
    comps = (
        Component.from_counts("replay_margin", MARGIN_EDGES, margin_counts or HONEST_MARGIN_COUNTS, margin_weight),
        Component.from_counts("toploc_exp_mismatches", EXP_EDGES, exp_counts or HONEST_EXP_COUNTS, exp_weight),
    )
    return EvidenceRules(components=comps, default_class=default_class, **kw)  # type: ignore[arg-type]


DEFAULT_RULES = default_rules()
"""The `mixed` profile's rules: workers judged by the most tolerant class measured (`cpu-bf16`)."""
FP32_RULES = default_rules(default_class="cpu-fp32")
"""The `fp32` profile's rules: every node computes in fp32, so the fp32 pair's histogram is the honest one."""


def rules_for_profile(name: str) -> EvidenceRules:
    """The evidence rules shipped for verification profile `name` (`mixed`, `fp32`, or an alias of them)."""
    key = PROFILE_ALIASES.get(name, name)
    if key not in PROFILES:
        raise ValueError(f"unknown verification profile {name!r}")
    return FP32_RULES if key == "fp32" else DEFAULT_RULES
