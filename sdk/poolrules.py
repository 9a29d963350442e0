"""Pool rules: everything a pool's workers and validators must agree on, as one versioned document.

    rules = PoolRules(taskset_cid=cid, model=ModelRules(family="smollm2-135m"), group_size=8, ...)
    data = rules.to_bytes()                   # canonical JSON; its IPFS CID is what the pool records
    rules = PoolRules.from_bytes(data, source=cid)

The document (`intellect.poolrules/v1`) lives on IPFS; `intellect pool create` publishes it and records
its CID in the pool on-chain (the pool's `rulesCid`; the rules name the task set). Agents read the rules from the chain, not from their configuration: a local setting that
contradicts them stops the agent at start with an error naming the field (`conflicts`), so nobody is
challenged and slashed for a configuration mismatch.

A document that contradicts itself is refused when it is built (`PoolRulesError` naming the fields),
e.g. `max_units_per_submission` below the most tokens an honest submission can hold (largest budget ×
group size × problems per task). A new document (`PoolRules.build_new`, what `intellect pool create`
publishes) is also refused for rules a stored one may keep carrying, e.g. `length_alpha` × the largest
budget ≥ 1 (a short solved answer would score no better than an unsolved one); reading a published
document never applies those checks, so nothing already accepted is lost.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._errors import ConfigError, SchemaVersionError
from .ipfs import compute_cid

__all__ = [
    "EMPTY_FILE_CID",
    "POOLRULES_SCHEMA",
    "ModelRules",
    "PoolRules",
    "PoolRulesError",
    "SamplerRules",
    "conflicts",
]

POOLRULES_SCHEMA = "intellect.poolrules/v1"
EMPTY_FILE_CID = "bafkreihdwdcefgh4dqkjv67uzcmw7ojee6xedzdetojuzjevtenxquvyku"  # CIDv1 raw sha2-256 of b""
"""The rules CID of a pool that names no rules document (the empty file): a dev default pool's."""
MAX_RULES_BYTES = 64 * 1024
"""Largest rules document read (a real one is well under 2 KB)."""
HARDWARE_CLASSES = ("cpu", "gpu-small", "gpu-large")
DEFAULT_CLASS_HISTORY = 4
"""`class_history` when a document leaves it out."""
DEFAULT_CLASS_LEASE_SHARE = 0.5
"""`class_lease_share` when a document leaves it out."""
MAX_UNITS = 2**32 - 1
"""Largest `max_units_per_submission` (the ledger keeps work units in 32 bits)."""


ProblemOrder = Literal["epochs", "random", "adaptive"]
"""How a pool assigns a claim's problems (`intellect.verifier.tasks.assign_problems`)."""
PROBLEM_ORDERS: tuple[str, ...] = get_args(ProblemOrder)


class PoolRulesError(ConfigError):
    """A pool-rules document that is malformed, of another schema, or contradicts itself; or a local
    setting that contradicts the pool's rules. The message names the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelRules(_Strict):
    """Which model family the pool trains and how prompts are formatted."""

    family: str = Field(min_length=1, max_length=128)
    """Model family the checkpoints are of (e.g. `smollm2-135m`, `tiny-llama`): informational for
    operators choosing hardware; the checkpoint itself comes from the chain."""
    chat_template: Literal["model", "none"] = "model"
    """`model`: prompts are the single user turn of the checkpoint's own chat template (when its tokenizer
    has one); `none`: the bare task text."""


class SamplerRules(_Strict):
    """How completions are sampled (validators replay the sampler)."""

    name: Literal["gumbel-replay"] = "gumbel-replay"
    """The replayable seeded Gumbel-max sampler (`intellect.verifier.replay`)."""
    temperature: float = Field(1.0, gt=0, le=10)


class PoolRules(_Strict):
    """`intellect.poolrules/v1`: the rules of one pool."""

    schema_: Literal["intellect.poolrules/v1"] = Field(POOLRULES_SCHEMA, alias="schema")
    taskset_cid: str = Field(min_length=1, max_length=128)
    """CID of the training task set (`intellect.taskset/v1`) workers sample problems from."""
    heldout_cid: str | None = Field(None, min_length=1, max_length=128)
    """CID of the held-out task set the trainer evaluates on (never sampled for work)."""
    model: ModelRules
    group_size: int = Field(ge=2, le=256)
    """Completions per problem (a GRPO group)."""
    problems_per_task: int = Field(ge=1, le=256)
    """Problems each claimed task's seed assigns."""
    budgets: dict[str, list[int]]
    """Thinking budgets (target completion lengths, tokens) per hardware class; `cpu` is required and
    serves classes without an entry."""
    length_alpha: float = Field(ge=0, le=1)
    """Length-penalty coefficient: reward = task reward − α·|target − actual| (on the completions `length_scope`
    names)."""
    length_scope: Literal["solved", "all"] = "solved"
    """Which completions carry the length penalty: `solved` (task reward > 0; an unsolved one scores 0 at any
    length, so a group of wrong answers is no length signal: issue 17) or `all` (every completion, the rule
    before the field existed). A new document gets `solved`; a stored document without the field is read as
    `all`, so pools made before it keep judging their submissions as they were created (and keep their CID:
    `all` is left out of the canonical document)."""
    problem_order: ProblemOrder = "epochs"
    """How a claim's problems are chosen (`intellect.verifier.tasks.assign_problems`): `epochs` (the claim's slot,
    by ledger task id, in seeded shuffled passes over the task set: every problem once per pass, as a
    trainer's epochs walk its data) or `random` (drawn from the claim's chain seed: a problem can come back
    before others were served once; the rule before the field existed). A new document gets `epochs`; a stored
    document without the field is read as `random` (and `random` is left out of the canonical document, so
    pools made before it keep their CID), or `adaptive` (online difficulty filtering, issue 37: drawn from the
    claim's seed, weighted by the solve rates the trainer publishes with each checkpoint,
    `intellect.verifier.difficulty`). Target lengths come from the claim's seed either way."""
    sampler: SamplerRules = Field(default_factory=SamplerRules)
    toploc_profile: Literal["mixed", "fp32", "reference"] = "mixed"
    """Verification profile validators apply (`mixed`: honest bf16 and fp32 workers on any hardware; `fp32`:
    every node in fp32, exact; `reference`: the old name of `mixed`)."""
    max_units_per_submission: int = Field(ge=1, le=MAX_UNITS)
    """Most work units (completion tokens) one submission may claim; the pool's on-chain limit."""
    assigned_validators: int | None = Field(None, ge=1, le=64)
    """Validators the chain assigns to each submission from its claim's seed (`intellect.verifier.assignment`):
    only their attestations count towards the trainer's quorum. None: quorum + 1; never fewer than the quorum.
    Left out of the canonical document when None, so rules made before it keep their CID."""
    class_history: int | None = Field(None, ge=0, le=64)
    """Decided leases a budget class is earned over (`intellect.verifier.budget_class`): a claim gets the lower
    of the node's declared class and the class its last `class_history` decided leases earn (verified tokens
    per lease-second; a node with fewer earns `cpu`). None: 4; 0: the declared class is believed (development
    pools). Left out of the canonical document when None."""
    class_lease_share: float | None = Field(None, gt=0, le=1)
    """A class is earned at the rate that finishes its full-length submission in this share of the lease.
    None: 0.5. Left out of the canonical document when None."""
    evidence_rules_cid: str | None = Field(None, min_length=1, max_length=128)
    """CID of the pool's per-worker evidence rules (`intellect.evidence-rules/v1`, `intellect.verifier.evidence`):
    the honest distributions calibrated on this pool's model, which validators judge every worker's history by
    (`bench/verifier/bench_evidence.py rules` writes one; `pool create --evidence-rules`). None: the rules shipped
    for `toploc_profile` (calibrated on the tiny model). Left out of the canonical document when None."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("budgets")
    @classmethod
    def _budgets(cls, v: dict[str, list[int]]) -> dict[str, list[int]]:
        if "cpu" not in v:
            raise ValueError("budgets needs a 'cpu' entry (it serves hardware classes without one)")
        for name, lengths in v.items():
            if name not in HARDWARE_CLASSES:
                raise ValueError(f"budgets[{name!r}]: unknown hardware class (known: {', '.join(HARDWARE_CLASSES)})")
            if not lengths or any(int(x) <= 0 or int(x) > 32768 for x in lengths):
                raise ValueError(f"budgets[{name!r}] must be a non-empty list of token counts in 1..32768")
        return {k: [int(x) for x in v[k]] for k in sorted(v)}

    @model_validator(mode="after")
    def _consistent(self) -> PoolRules:
        need = self.full_submission_units
        if self.max_units_per_submission < need:
            raise ValueError(
                f"max_units_per_submission {self.max_units_per_submission} is below the largest budget "
                f"{self.max_budget} × group_size {self.group_size} × problems_per_task {self.problems_per_task} "
                f"= {need}: an honest worker's full-length submission would be refused on-chain"
            )
        if self.heldout_cid is not None and self.heldout_cid == self.taskset_cid:
            raise ValueError("heldout_cid equals taskset_cid: the held-out set must be disjoint from training")
        return self

    def new_document_problems(self) -> list[str]:
        """Why these rules should not be published as a new pool's (empty: none). Not part of validation:
        a document already published keeps loading (`from_bytes`) whatever these say."""
        out = []
        worst = self.length_alpha * self.max_budget
        if worst >= 1:
            out.append(
                f"length_alpha {self.length_alpha:g} × the largest budget {self.max_budget} = {worst:g} ≥ 1: a solved "
                f"answer far below its target scores 1 − length_alpha·(target − length) ≤ 0, the score of an "
                f"unsolved one, so the rules would teach that a short right answer is no better than a wrong one; "
                f"for these budgets length_alpha must be below 1/{self.max_budget} = {1 / self.max_budget:.6g}")
        return out

    @classmethod
    def build_new(cls, doc: Mapping[str, Any], source: str = "pool rules") -> PoolRules:
        """`build` for a document about to be published (`intellect pool create`): also refuses the rules
        `new_document_problems` names (`PoolRulesError` naming the field)."""
        rules = cls.build(doc, source)
        if problems := rules.new_document_problems():
            raise PoolRulesError(f"{source}: " + "; ".join(problems))
        return rules

    @property
    def max_budget(self) -> int:
        return max(max(v) for v in self.budgets.values())

    @property
    def full_submission_units(self) -> int:
        """Units of an honest full-length submission: largest budget × group_size × problems_per_task (the
        floor of `max_units_per_submission`, and `intellect pool create`'s default for it)."""
        return self.max_budget * self.group_size * self.problems_per_task

    @classmethod
    def default_max_units(cls, doc: Mapping[str, Any], source: str = "pool rules") -> int:
        """`full_submission_units` of the rules `doc` describes before it has a `max_units_per_submission`
        (validated as any document: `PoolRulesError` naming the fields that are wrong)."""
        probe = {**doc, "max_units_per_submission": MAX_UNITS}  # the largest admitted: never below the floor
        return cls.build(probe, source=source).full_submission_units

    @property
    def effective_class_history(self) -> int:
        return DEFAULT_CLASS_HISTORY if self.class_history is None else self.class_history

    @property
    def effective_class_lease_share(self) -> float:
        return DEFAULT_CLASS_LEASE_SHARE if self.class_lease_share is None else self.class_lease_share

    def budgets_for(self, hardware_class: str) -> list[int]:
        """Target lengths assigned to a node of `hardware_class` (`cpu`'s when the class has no entry)."""
        return list(self.budgets.get(hardware_class) or self.budgets["cpu"])

    # -- encoding ---------------------------------------------------------------------------

    def to_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): the same rules always give the same CID."""
        optional = ("assigned_validators", "class_history", "class_lease_share", "evidence_rules_cid")
        exclude = {name for name in optional if getattr(self, name) is None}
        if self.length_scope == "all":
            exclude.add("length_scope")  # a document without the field means `all` (`from_bytes`)
        if self.problem_order == "random":
            exclude.add("problem_order")  # a document without the field means `random` (`from_bytes`)
        doc = self.model_dump(mode="json", by_alias=True, exclude=exclude or None)
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def cid(self) -> str:
        return compute_cid(self.to_bytes())

    @classmethod
    def build(cls, doc: Mapping[str, Any], source: str = "pool rules") -> PoolRules:
        """Validate a mapping; `PoolRulesError` naming `source` and every wrong field."""
        try:
            return cls.model_validate(dict(doc))
        except ValidationError as exc:
            raise PoolRulesError(f"{source}: " + "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '<document>'}: {e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors())) from None

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "pool rules") -> PoolRules:
        """Parse a rules document fetched from `source` (its CID); refuses other schemas by name."""
        if len(data) > MAX_RULES_BYTES:
            raise PoolRulesError(f"{source}: {len(data)} bytes, over the {MAX_RULES_BYTES} a rules document may have")
        try:
            doc = json.loads(bytes(data).decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise PoolRulesError(f"{source}: not a JSON document: {exc}") from exc
        if not isinstance(doc, dict):
            raise PoolRulesError(f"{source}: a rules document is a JSON object, got {type(doc).__name__}")
        if doc.get("schema") != POOLRULES_SCHEMA:
            raise SchemaVersionError(f"pool rules {source}", str(doc.get("schema"))[:80], POOLRULES_SCHEMA)
        return cls.build(cls.as_stored(doc), source)

    @staticmethod
    def as_stored(doc: dict[str, Any]) -> dict[str, Any]:
        """`doc` read as a stored document (one that carries the schema): a field `to_bytes` leaves out reads as
        the value it stands for — no `length_scope` means `all` and no `problem_order` means `random`, the rules
        of documents made before those fields."""
        if doc.get("schema") == POOLRULES_SCHEMA:
            doc.setdefault("length_scope", "all")
            doc.setdefault("problem_order", "random")
        return doc

    @staticmethod
    def is_rules_document(data: bytes) -> bool:
        """True when `data` looks like a rules document (a JSON object with this schema), cheaply."""
        head = bytes(data[:4096])
        return head.lstrip().startswith(b"{") and b'"schema":"intellect.poolrules/' in head


def conflicts(rules: PoolRules, local: Mapping[str, Any]) -> list[str]:
    """Fields whose locally set value contradicts the rules, as `field: local X, pool rules Y` lines.

    `local` maps a rules field (`group_size`, `problems_per_task`, `budgets`, `length_alpha`, `length_scope`,
    `problem_order`, `temperature`, `toploc_profile`, `taskset_cid`, `class_history`, `class_lease_share`) to the
    value an operator set explicitly; fields left at their defaults are not passed and never conflict (the rules fill
    them in). The budget-class fields compare by meaning (None is the default).
    """
    pool = {"group_size": rules.group_size, "problems_per_task": rules.problems_per_task,
            "budgets": rules.budgets, "length_alpha": rules.length_alpha, "length_scope": rules.length_scope,
            "problem_order": rules.problem_order, "temperature": rules.sampler.temperature,
            "toploc_profile": rules.toploc_profile,
            "taskset_cid": rules.taskset_cid, "class_history": rules.effective_class_history,
            "class_lease_share": rules.effective_class_lease_share}
    defaults = {"class_history": DEFAULT_CLASS_HISTORY, "class_lease_share": DEFAULT_CLASS_LEASE_SHARE}
    out = []
    for name, value in local.items():
        if name not in pool:
            raise KeyError(f"{name!r} is not a pool-rules field")
        if value is None and name in defaults:
            value = defaults[name]
        want = pool[name]
        same = (value == want) if not isinstance(want, float) else abs(float(value) - want) <= 1e-12
        if name == "budgets":
            same = {k: [int(x) for x in v] for k, v in dict(value).items()} == want
        if not same:
            out.append(f"{name}: local {value!r}, pool rules {want!r}")
    return out
