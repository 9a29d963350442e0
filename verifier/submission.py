"""What a valid submission is: the rules every honest worker, validator and trainer must share.

A worker follows them to write its rollout file, a validator checks a file against them, a trainer
refuses what they refuse. They live here, in one place, as pure functions:

    prompt_text(task, target_len)          the prompt the policy sees (task text + thinking-budget suffix,
                                           in the model's chat template when it has one; torch-free, in
                                           `intellect.verifier.prompts`)
    thinking_budgets(budgets, hardware)    the target lengths a node's declared hardware class gets
    class_budgets(budgets, cls)            the target lengths of a budget class (the claim's: the lower of the
                                           declared class and the one its verified history earns,
                                           `intellect.verifier.budget_class`)
    score_group(task, texts, lengths, ...) rewards and group-normalised advantages of one problem's group
    group_advantages(rewards)              GRPO's (r − mean) / (std + ε) per group
    is_fresh / too_stale                   the staleness rule: policy step s may train step t iff t − s ≤ async_level
    check_submission(rollouts, claim,      the acceptance rule: every check a validator runs, cheap ones first,
        task_set, rules, model) -> Verdict  sandboxed code last; each failure a `RejectReason`

`check_submission`, in order (a failure stops at the first):

    file parses (schema, limits) → worker / task / policy step / proofs hash / work units match the chain
    → seed = the task claim's → group size and length α = the pool's → problems and target lengths =
    assign_problems(the pool's problem order, seed, task id, budgets of the claim's budget class) → checkpoint = the on-chain one for the
    file's step → every prompt re-tokenised → every completion ends where the sampler ended → TOPLOC proofs
    and the seeded sampler replayed by one batched prefill → rewards and advantages recomputed.

The chain facts a check needs late (the claim's seed, its budget class, the checkpoint) are looked up
only when the cheaper checks passed: a malformed file costs no RPC and no model load. Rewards come last:
a code task's reward runs the completion in the sandbox (`intellect.verifier.sandbox`), so code runs only
for completions the replay proved the model's, never for a stranger's made-up text. A file wrong in both
its proofs and its rewards is rejected with the TOPLOC / replay reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, NamedTuple

import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

from intellect.sdk import IntellectError
from intellect.verifier.budget_class import hardware_class
from intellect.verifier.completion import EndError, check_completion_end, eos_token_ids
from intellect.verifier.difficulty import DifficultyTable
from intellect.verifier.evidence import EvidenceRules, observe, rules_for_profile, submission_llr
from intellect.verifier.prefill import verify_samples
from intellect.verifier.prompts import prompt_text
from intellect.verifier.replay import problem_seed, sample_seed
from intellect.verifier.rewards import (
    JudgeBudget,
    Judgement,
    LengthScope,
    TaskScore,
    applied_length_penalty,
    task_score,
)
from intellect.verifier.rollouts import RolloutFile, RolloutFileError, RolloutRow
from intellect.verifier.tasks import ProblemOrder, Task, TaskSet, assign_problems
from intellect.verifier.toploc import (
    ReasonCode,
    check_aggregate,
    check_replay_budget,
    profile,
    proofs_hash,
)

__all__ = [
    "ADV_EPS",
    "EVIDENCE_HIGH",
    "REWARD_TOL",
    "Checkpoint",
    "Claim",
    "Hardware",
    "Outcome",
    "RejectReason",
    "Rejection",
    "SubmissionRules",
    "Verdict",
    "accepted_task_reward",
    "check_submission",
    "class_budgets",
    "group_advantages",
    "group_rows",
    "hardware_class",
    "is_fresh",
    "prompt_text",
    "score_group",
    "thinking_budgets",
    "too_stale",
]

ADV_EPS = 1e-6
REWARD_TOL = 1e-4
"""Largest difference between a reward (or advantage) a worker wrote and the recomputed one."""


# ---------------------------------------------------------------------------------------------
# thinking budgets by hardware class


class Hardware(NamedTuple):
    """A node's declared hardware (its NodeRegistry record)."""

    gpu_model: str
    vram_gib: int
    gpu_count: int


def thinking_budgets(budgets: Mapping[str, Sequence[int]], gpu_model: str, vram_gib: int, gpu_count: int) -> list[int]:
    """The target lengths a node of this declared hardware class is assigned (INTELLECT-2: slow nodes
    get short thinking budgets): `budgets[class]`, else `budgets["cpu"]`. Validators recompute this
    from the node's on-chain record. `ValueError` when neither entry exists."""
    return class_budgets(budgets, hardware_class(gpu_model, vram_gib, gpu_count))


def class_budgets(budgets: Mapping[str, Sequence[int]], cls: str) -> list[int]:
    """The target lengths of budget class `cls`: `budgets[cls]`, else `budgets["cpu"]` (`ValueError` when
    neither exists). A claim's class is `intellect.verifier.budget_class.budget_class`, not the declaration."""
    chosen = budgets.get(cls) or budgets.get("cpu")
    if not chosen:
        raise ValueError(f"tasks.budgets has no entry for hardware class {cls!r} (nor 'cpu')")
    return [int(b) for b in chosen]


# ---------------------------------------------------------------------------------------------
# group scoring


def group_advantages(rewards: torch.Tensor, eps: float = ADV_EPS) -> torch.Tensor:
    """Per-group normalised advantages.

    rewards: (G, n) — G groups (prompts) of n completions each.
    Returns (G, n): (r - mean) / (std + eps), std the sample standard deviation (n - 1, as in
    TRL's and prime-rl's GRPO). A group of identical rewards gives zeros.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be (groups, n), got shape {tuple(rewards.shape)}")
    if rewards.shape[1] < 2:
        raise ValueError("a GRPO group needs at least 2 completions")
    rewards = rewards.to(torch.float64)
    mean = rewards.mean(dim=1, keepdim=True)  # (G, 1)
    std = rewards.std(dim=1, keepdim=True)  # (G, 1), unbiased
    return ((rewards - mean) / (std + eps)).to(torch.float32)


def score_group(task: Task, texts: Sequence[str], lengths: Sequence[int], target_len: int | None,
                alpha: float, *, judge: JudgeBudget | None = None, claimed: Sequence[float] | None = None,
                length_scope: LengthScope = "solved") -> list[tuple[float, float, float, float]]:
    """(task_reward, length_penalty, total, advantage) for each completion of one problem's group.

    The same function runs in the worker (to write the file) and the validator (to check it), each with one
    `judge` budget for the whole submission, its groups scored in file order (`intellect.verifier.rewards`:
    which answers reach the math judge, and so where its call budget runs out, is the same on both sides).
    `claimed`: the worker's task rewards (validator side); a row whose claim the judge's outcome here cannot
    refute counts with the claim (`accepted_task_reward`), in its total and in the group's advantages.
    The length penalty applies to solved rows only (`applied_length_penalty`): a group whose answers are all
    wrong has equal totals and zero advantages whatever their lengths (issue 17); `length_scope="all"`: every
    row (the pool rules' scope, `all` for documents made before the change).
    """
    scored: list[tuple[float, float]] = []
    for i, (text, n) in enumerate(zip(texts, lengths, strict=True)):
        score = task_score(task, text, judge=judge)
        tr = score.value if claimed is None else accepted_task_reward(score, claimed[i])
        scored.append((tr, applied_length_penalty(tr, target_len, n, alpha, length_scope)))
    totals = torch.tensor([[tr - lp for tr, lp in scored]], dtype=torch.float64)  # (1, n)
    adv = group_advantages(totals)[0].tolist()
    return [(tr, lp, tr - lp, float(a)) for (tr, lp), a in zip(scored, adv, strict=True)]


def accepted_task_reward(score: TaskScore, claimed: float) -> float:
    """The task reward a validator holds a worker to, given its own score of the row and the worker's claim.

    Exact, except where the math judge's machine-dependent limits make the validator's score no verdict:
      - the validator's comparison was UNJUDGEABLE: the claim (0 or 1) stands, since the worker's machine
        may have judged the answer within its limits; the validator cannot refute it;
      - the validator judged EQUAL and the worker claims 0: it stands, since 0 is what an UNJUDGEABLE
        comparison scores on the worker's side (a slow or loaded machine).
    NOT_EQUAL and OVER_BUDGET are the same on every machine: the worker is held to them. Pay is per token
    and the trainer recomputes rewards itself, so a claim taken here moves no money and no gradient.
    """
    if claimed not in (0.0, 1.0):
        return score.value
    if score.judged is Judgement.UNJUDGEABLE or (score.judged is Judgement.EQUAL and claimed == 0.0):
        return claimed
    return score.value


def group_rows(rows: Sequence[RolloutRow]) -> list[tuple[str, list[RolloutRow]]]:
    """The rows of a rollout file as (problem id, its consecutive rows): one group per problem."""
    groups: list[tuple[str, list[RolloutRow]]] = []
    for r in rows:
        if not groups or groups[-1][0] != r.problem_id:
            groups.append((r.problem_id, []))
        groups[-1][1].append(r)
    return groups


# ---------------------------------------------------------------------------------------------
# staleness


def too_stale(train_step: int, policy_step: int, async_level: int) -> bool:
    """True when a rollout of `policy_step` is older than training step `train_step` may take
    (INTELLECT-2's async_level: t − s > async_level). The ledger refuses such submissions too."""
    return train_step - policy_step > async_level


def is_fresh(train_step: int, policy_step: int, async_level: int) -> bool:
    """True when training step `train_step` may consume a rollout of `policy_step`.

    The rule: t - s <= async_level. A rollout from the future (s > t) is never valid: no
    checkpoint of that step can exist yet.
    """
    if async_level < 0:
        raise ValueError(f"async_level must be >= 0, got {async_level}")
    return policy_step <= train_step and not too_stale(train_step, policy_step, async_level)


# ---------------------------------------------------------------------------------------------
# the acceptance rule


class RejectReason(StrEnum):
    """Why a submission is rejected (stable strings: they go into challenge evidence and metrics)."""

    BAD_CID = "bad_cid"  # the rollouts CID is malformed, or its content too large / not what it names
    UNAVAILABLE = "unavailable"  # the rollout file could not be fetched while the window allowed
    BAD_FILE = "bad_file"  # not a readable rollout file (schema, limits, Parquet)
    WRONG_WORKER = "wrong_worker"  # the file names another worker than the submitting node
    WRONG_TASK = "wrong_task"  # the file answers another task
    WRONG_POLICY_STEP = "wrong_policy_step"  # the file's policy step is not the one submitted
    PROOFS_HASH_MISMATCH = "proofs_hash_mismatch"  # the proofs do not hash to the on-chain proofs hash
    WORK_UNITS_MISMATCH = "work_units_mismatch"  # generated tokens != claimed work units
    UNKNOWN_TASK = "unknown_task"  # no task claim on chain for this id
    WRONG_SEED = "wrong_seed"  # the file's seed is not the claim's chain-drawn seed
    WRONG_GROUP_SIZE = "wrong_group_size"  # completions per problem != the pool's group size
    WRONG_LENGTH_ALPHA = "wrong_length_alpha"  # length-penalty α != the pool's
    WRONG_PROBLEMS = "wrong_problems"  # problems or target lengths are not the ones the seed assigns
    WRONG_CHECKPOINT = "wrong_checkpoint"  # the file names another checkpoint than the step's on-chain one
    WRONG_PROMPT = "wrong_prompt"  # prompt tokens differ from the task's prompt
    # where a completion ends (`intellect.verifier.completion.EndError`)
    EMPTY_COMPLETION = EndError.EMPTY.value
    TOKENS_AFTER_EOS = EndError.TOKENS_AFTER_EOS.value
    CUT_SHORT = EndError.CUT_SHORT.value
    OVER_BUDGET = EndError.OVER_BUDGET.value  # more tokens than the thinking budget
    REWARD_MISMATCH = "reward_mismatch"  # a reward or advantage differs from the recomputed one
    # TOPLOC and the sampler replay (`intellect.verifier.toploc.ReasonCode`, prefixed)
    TOPLOC_MALFORMED_PROOF = "toploc_" + ReasonCode.MALFORMED_PROOF.value
    TOPLOC_WRONG_PROOF_COUNT = "toploc_" + ReasonCode.WRONG_PROOF_COUNT.value
    TOPLOC_BAD_ACTIVATIONS = "toploc_" + ReasonCode.BAD_ACTIVATIONS.value
    TOPLOC_EXP_MISMATCH = "toploc_" + ReasonCode.EXP_MISMATCH.value
    TOPLOC_MANTISSA_MEAN = "toploc_" + ReasonCode.MANTISSA_MEAN.value
    TOPLOC_MANTISSA_MEDIAN = "toploc_" + ReasonCode.MANTISSA_MEDIAN.value
    TOPLOC_IMPLAUSIBLE_TOKEN = "toploc_" + ReasonCode.IMPLAUSIBLE_TOKEN.value
    TOPLOC_REPLAY_MISMATCH = "toploc_" + ReasonCode.REPLAY_MISMATCH.value
    TOPLOC_REPLAY_DIFFERING = "toploc_" + ReasonCode.REPLAY_DIFFERING.value
    TOPLOC_AGGREGATE_MANTISSA = "toploc_" + ReasonCode.AGGREGATE_MANTISSA.value
    TOPLOC_INVALID_SAMPLE = "toploc_" + ReasonCode.INVALID_SAMPLE.value

    @classmethod
    def of_end(cls, error: EndError) -> RejectReason:
        return cls(error.value)

    @classmethod
    def of_toploc(cls, code: ReasonCode | str | None) -> RejectReason:
        return cls(f"toploc_{code}")


class Rejection(IntellectError):
    """A submission failed a check: `reason` is a stable code, `stats` the failing numbers."""

    def __init__(self, reason: RejectReason | str, detail: str, stats: dict[str, Any] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = str(reason)
        self.detail = detail
        self.stats = stats or {}


Outcome = Literal["accept", "reject", "ambiguous"]


class Verdict(BaseModel):
    """The outcome of `check_submission` (`reason` is a `RejectReason` value when rejected).

    `outcome` is three-way (issue 35): `accept` (attest, pay, train), `reject` (challenge: slashable) and
    `ambiguous`: every bound passed, but the submission's own evidence (`llr`, `intellect.verifier.evidence`) is
    more than honest numerics give with probability e^−`EvidenceRules.ambiguous_llr`. Ambiguous never slashes and
    never pays at once: the validator neither attests nor challenges it (its pay waits for the challenge window,
    in which the worker's accumulated evidence may get it voided), the trainer never sees an attestation for it,
    and its LLR joins the worker's evidence. `accepted` is True only for `accept` (callers that read only it treat
    an ambiguous submission as not accepted; they must not challenge it: see `slashable`)."""

    model_config = ConfigDict(extra="forbid")

    submission_id: int
    accepted: bool
    reason: str | None = None
    detail: str = ""
    stats: dict[str, Any] = Field(default_factory=dict)
    seconds: float = 0.0
    outcome: Outcome = "accept"
    """`accept`, `reject` or `ambiguous`; defaults to what `accepted` says for verdicts made without it"""
    llr: float | None = None
    """the submission's log-likelihood ratio, cheat vs honest (`intellect.verifier.evidence.submission_llr`), when
    its samples were replayed"""
    observations: dict[str, list[int]] | None = None
    """the binned observations the LLR came from (per component, count per bin): what a voter recomputes"""

    @model_validator(mode="before")
    @classmethod
    def _default_outcome(cls, data: Any) -> Any:
        if isinstance(data, dict) and "outcome" not in data:
            data = {**data, "outcome": "accept" if data.get("accepted") else "reject"}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> Verdict:
        if self.accepted != (self.outcome == "accept"):
            raise ValueError(f"verdict {self.submission_id}: accepted={self.accepted} but outcome {self.outcome}")
        return self

    @property
    def slashable(self) -> bool:
        """A rejection: the validator challenges it. Never an ambiguous verdict."""
        return self.outcome == "reject"


class SubmissionRules(BaseModel):
    """The pool's rules a submission is checked against (from the agents' `worker`/`tasks`/`validator`
    settings: every honest node of a pool runs with the same values)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    problems_per_task: int
    group_size: int
    length_alpha: float
    temperature: float
    budgets: dict[str, list[int]]
    """thinking budgets by hardware class (`cpu`, `gpu-small`, `gpu-large`)"""
    chat_template: Literal["model", "none"] = "none"
    """`model`: prompts are the single user turn of the checkpoint tokenizer's chat template (when it has
    one); `none`: the bare task text (`prompt_text`)"""
    length_scope: LengthScope = "solved"
    """which rows carry the length penalty (`intellect.verifier.rewards.applied_length_penalty`): `solved`, or `all`
    for pools whose rules document predates the field"""
    problem_order: ProblemOrder = "epochs"
    """how a claim's problems are chosen (`intellect.verifier.tasks.assign_problems`): `epochs` (the claim's slot in
    seeded shuffled passes over the task set, by ledger task id), `random` (drawn from the claim's seed: pools
    whose rules document predates the field) or `adaptive` (drawn from the claim's seed weighted by the difficulty
    table of the submission's checkpoint: online difficulty filtering)"""
    toploc_profile: Literal["mixed", "fp32", "reference"] = "mixed"
    """the verification profile (`intellect.verifier.toploc.PROFILES`): `mixed` (default) accepts honest bf16 and
    fp32 workers against a validator on any hardware; `fp32` is exact for pools whose every node computes in fp32;
    `reference` is the old name of `mixed`"""


class Checkpoint(NamedTuple):
    """A loaded policy checkpoint: the model, its tokenizer, its manifest CID on chain, and the difficulty table
    published with it (`intellect.verifier.difficulty.table_file`; None when it has none)."""

    model: Any
    tokenizer: Any
    cid: str
    difficulty: DifficultyTable | None = None


@dataclass(frozen=True)
class Claim:
    """What the chain says about one submission (`WorkSubmitted`) and where to find the rest.

    `seed` and `budget_class` are looked up only when the file passed the cheap checks: the claim's
    chain-drawn seed (`TaskClaimed`; raise `Rejection(UNKNOWN_TASK)` when there is none) and the claim's
    budget class (`cpu`, `gpu-small`, `gpu-large`): the lower of the node's declared class and the class its
    verified history earns, both as of the block before the claim (`intellect.verifier.budget_class`).
    """

    submission_id: int
    node: str
    policy_step: int
    proofs_hash: str
    work_units: int
    rollouts_cid: str
    seed: Callable[[], bytes]
    budget_class: Callable[[], str]


def check_submission(rollouts: bytes, claim: Claim, task_set: TaskSet, rules: SubmissionRules,
                     model: Callable[[int], Checkpoint], *, evidence: EvidenceRules | None = None,
                     compute_class: str | None = None,
                     difficulty: Callable[[int], DifficultyTable] | None = None) -> Verdict:
    """Run every check of a submission (see the module docstring); `model(step)` loads the checkpoint of
    the file's policy step, called only once the cheaper checks passed. Never raises `Rejection`:
    a failed check is a rejecting `Verdict`.

    `evidence`: the pool's evidence rules (default: `rules_for_profile(rules.toploc_profile)`); the verdict carries
    the submission's LLR and observations, and a submission that passes every check with LLR ≥
    `evidence.ambiguous_llr` is `ambiguous` (reason `evidence_high`). `compute_class`: the worker's declared class
    (the rules' default class when None or unknown). `difficulty(step)`: the difficulty table published with
    checkpoint `step`, read only in a pool whose problem order is `adaptive` (default: the loaded checkpoint's
    `difficulty`; none is the empty table)."""
    t0 = time.perf_counter()
    ev = evidence if evidence is not None else rules_for_profile(rules.toploc_profile)
    found: dict[str, Any] = {}
    try:
        stats = _check(rollouts, claim, task_set, rules, model, ev, compute_class, found, difficulty)
    except Rejection as rej:
        return Verdict(submission_id=claim.submission_id, accepted=False, reason=rej.reason, detail=rej.detail,
                       stats=rej.stats, seconds=time.perf_counter() - t0, outcome="reject",
                       llr=found.get("llr"), observations=found.get("observations"))
    llr = found.get("llr")
    if llr is not None and llr >= ev.ambiguous_llr:
        return Verdict(submission_id=claim.submission_id, accepted=False, reason=EVIDENCE_HIGH,
                       detail=f"every bound passed, but the submission's evidence LLR {llr:.2f} ≥ "
                              f"{ev.ambiguous_llr:.2f} (class {ev.judged_class(compute_class)}): ambiguous, held",
                       stats=stats, seconds=time.perf_counter() - t0, outcome="ambiguous", llr=llr,
                       observations=found.get("observations"))
    return Verdict(submission_id=claim.submission_id, accepted=True, stats=stats, seconds=time.perf_counter() - t0,
                   outcome="accept", llr=llr, observations=found.get("observations"))


EVIDENCE_HIGH = "evidence_high"
"""The reason of an `ambiguous` verdict: the submission's own evidence LLR reached `ambiguous_llr`."""


def _check(data: bytes, claim: Claim, task_set: TaskSet, rules: SubmissionRules,
           load: Callable[[int], Checkpoint], ev: EvidenceRules, compute_class: str | None,
           found: dict[str, Any], difficulty: Callable[[int], DifficultyTable] | None = None) -> dict[str, Any]:
    R = RejectReason
    # -- the file against the on-chain submission -----------------------------------------------
    try:
        rf = RolloutFile.from_bytes(data, name=claim.rollouts_cid)
    except RolloutFileError as exc:
        raise Rejection(R.BAD_FILE, str(exc)) from None
    meta = rf.meta
    if meta.worker.lower() != claim.node.lower():
        raise Rejection(R.WRONG_WORKER, f"file names worker {meta.worker}, submitted by {claim.node}")
    if meta.task_id != str(claim.submission_id):
        raise Rejection(R.WRONG_TASK, f"file answers task {meta.task_id}, submitted for {claim.submission_id}")
    if meta.policy_step != claim.policy_step:
        raise Rejection(R.WRONG_POLICY_STEP, f"file policy step {meta.policy_step}, on-chain {claim.policy_step}")
    ph = "0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex()
    if ph != claim.proofs_hash.lower():
        raise Rejection(R.PROOFS_HASH_MISMATCH, f"proofs hash {ph} != on-chain {claim.proofs_hash}")
    units = sum(len(r.completion_ids) for r in rf.rows)
    if units != claim.work_units:
        raise Rejection(R.WORK_UNITS_MISMATCH, f"{units} tokens generated, {claim.work_units} units claimed",
                        {"tokens": units, "claimed": claim.work_units})
    # -- the assignment: seed, pool rules, problems and budgets ---------------------------------
    seed = claim.seed()
    if meta.seed.lower().removeprefix("0x") != seed.hex():
        raise Rejection(R.WRONG_SEED, f"file seed {meta.seed} != claim seed {seed.hex()}")
    try:
        budgets = class_budgets(rules.budgets, claim.budget_class())
    except ValueError as exc:
        raise IntellectError(f"the pool rules cannot be applied: {exc}") from exc
    table, ck = None, None
    if rules.problem_order == "adaptive":  # the table of the file's checkpoint: the checkpoint is loaded first
        if difficulty is None:
            ck = load(meta.policy_step)
        table = difficulty(meta.policy_step) if ck is None else ck.difficulty
        table = table if table is not None else DifficultyTable.empty(rules.group_size)
    assigned = assign_problems(task_set, rules.problem_order, seed=seed, task_id=claim.submission_id,
                               n=rules.problems_per_task, target_lengths=budgets, difficulty=table)
    if meta.group_size != rules.group_size:
        raise Rejection(R.WRONG_GROUP_SIZE, f"group size {meta.group_size}, the pool's is {rules.group_size}")
    if abs(meta.length_alpha - rules.length_alpha) > 1e-12:
        raise Rejection(R.WRONG_LENGTH_ALPHA, f"length alpha {meta.length_alpha} != {rules.length_alpha}")
    groups = group_rows(rf.rows)
    got = [(g[0], g[1][0].target_length) for g in groups]
    want = [(a.task_id, a.target_len) for a in assigned]
    if got != want:
        raise Rejection(R.WRONG_PROBLEMS, f"problems/target lengths {got} != assigned {want}",
                        {"got": got, "assigned": want})
    # -- the checkpoint, the prompts, where completions end ---------------------------------------
    ck = ck if ck is not None else load(meta.policy_step)
    model, tok, cid = ck.model, ck.tokenizer, ck.cid
    if meta.model != cid:
        raise Rejection(R.WRONG_CHECKPOINT, f"file names checkpoint {meta.model}, step {meta.policy_step} is {cid}")
    eos = eos_token_ids(model, tok)
    for (pid, rows), a in zip(groups, assigned, strict=True):
        task = task_set[pid]
        text = prompt_text(task, a.target_len, tokenizer=tok if rules.chat_template == "model" else None)
        prompt_ids = list(tok(text, add_special_tokens=False)["input_ids"])
        for i, r in enumerate(rows):
            if r.target_length != a.target_len:
                raise Rejection(R.WRONG_PROBLEMS, f"row {i} of {pid}: target {r.target_length} != {a.target_len}")
            if list(r.prompt_ids) != prompt_ids:
                raise Rejection(R.WRONG_PROMPT, f"problem {pid} row {i}: prompt tokens differ from the task's")
            # empty, over the budget, tokens after EOS, cut short: paid tokens = sampled tokens
            end = check_completion_end(r.completion_ids, eos, a.target_len)
            if end.error is not None:
                raise Rejection(R.of_end(end.error), f"problem {pid} row {i}: {end.detail}",
                                {"row": i, "problem": pid, "tokens": len(r.completion_ids)})
    # -- TOPLOC proofs and the sampler replay: one batched prefill ------------------------------
    # the sampler's seed of row i of problem k, as the worker derived it (replayed by verify_samples)
    samples = [(list(r.prompt_ids), list(r.completion_ids), list(r.proofs), sample_seed(problem_seed(seed, k), i))
               for k, (_, rows) in enumerate(groups) for i, r in enumerate(rows)]
    thresholds = profile(rules.toploc_profile)  # TOPLOC bounds, replay tolerance and differing budget together
    results = verify_samples(model, samples, thresholds, temperature=rules.temperature)
    # the evidence (issue 35): no model work, the replay's margins and TOPLOC's chunks binned, before any verdict
    obs = observe(results, ev)
    found["observations"] = {k: list(v) for k, v in obs.counts.items()}
    found["llr"] = submission_llr(obs, ev, compute_class)
    for i, res in enumerate(results):
        if not res.ok:
            chunk = res.chunks[res.failed_chunk] if res.chunks and res.failed_chunk is not None else None
            raise Rejection(R.of_toploc(res.reason), f"row {i}: {res.detail}",
                            {"row": i, "failed_chunk": res.failed_chunk,
                             "chunk": chunk.model_dump() if chunk is not None else None,
                             "failed_rows": sum(1 for r in results if not r.ok), "rows": len(results)})
    agg = check_aggregate(results, thresholds)  # small deviations everywhere (a slightly different model)
    if not agg.ok:
        raise Rejection(R.of_toploc(agg.reason), agg.detail, {"rows": len(results)})
    budget = check_replay_budget(results, thresholds)  # tokens chosen within the per-token tolerance
    if not budget.ok:
        raise Rejection(R.of_toploc(budget.reason), budget.detail, {"rows": len(results)})
    # -- the rewards, only for completions proven the model's (a code task runs them in the sandbox) --
    worst = 0.0
    judge = JudgeBudget()  # the math judge's allowance for this whole submission, rows in file order
    for (pid, rows), a in zip(groups, assigned, strict=True):
        task = task_set[pid]
        texts = [tok.decode(r.completion_ids, skip_special_tokens=True) for r in rows]
        scored = score_group(task, texts, [len(r.completion_ids) for r in rows], a.target_len, rules.length_alpha,
                             judge=judge, claimed=[r.task_reward for r in rows], length_scope=rules.length_scope)
        for i, (r, (tr, lp, total, adv)) in enumerate(zip(rows, scored, strict=True)):
            diffs = {"task_reward": abs(r.task_reward - tr), "length_penalty": abs(r.length_penalty - lp),
                     "reward": abs(r.reward - total), "advantage": abs(r.advantage - adv)}
            bad = {k: v for k, v in diffs.items() if v > REWARD_TOL}
            if bad:
                raise Rejection(R.REWARD_MISMATCH, f"problem {pid} row {i}: {sorted(bad)} differ from recomputed",
                                {"row": i, "problem": pid, "claimed": {"task_reward": r.task_reward,
                                 "reward": r.reward, "advantage": r.advantage},
                                 "recomputed": {"task_reward": tr, "reward": total, "advantage": adv}})
            worst = max(worst, *diffs.values())
    return {"rows": len(rf.rows), "tokens": units, "max_reward_diff": worst,
            "mean_reward": sum(r.reward for r in rf.rows) / len(rf.rows), "math_judge": judge.stats()}
