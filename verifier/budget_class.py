"""Which thinking budgets a worker's claim gets: the lower of its declared class and the class its verified
history earns (issue 21). A declaration is believed only as far as the chain has seen the node deliver.

    rule = ClassRule.of(history=rules.class_history, lease_share=rules.class_lease_share)
    thresholds = rule.thresholds(budgets, group_size, problems_per_task, lease_duration)
    cls = budget_class(declared, outcomes, thresholds, rule.history)     # `cpu`, `gpu-small` or `gpu-large`

`outcomes` are the node's decided leases in the pool as of the end of the block before the claim's block,
in claim order (`intellect.sdk.WorkHistory`): a submission whose challenge window closed unchallenged (or
whose challenges were all rejected) is *verified* and counts its work units over its lease time (submit
time − claim time); a lease that expired unsubmitted, a submission upheld by a challenge and one voided by
an upheld challenge's wipe are *failures* and count 0 units over the whole lease. Submissions still in
their window (or under challenge) and live leases are not decided yet and do not count.

The earned class is the highest class whose threshold the node's rate over its last `history` decided
leases (Σ units / Σ lease seconds) reaches; a node with fewer than `history` decided leases (a new node)
earns only the lowest class, `cpu`. A class's threshold is the rate at which a full-length submission of
that class (its largest budget × group size × problems per task) takes `lease_share` of the pool's lease:

- an overstated declaration is never paid for: until the chain has seen the node deliver at the rate of
  its declared class, its claims get the lower class's (shorter) budgets, and a file written with the
  declared class's budgets is rejected (`wrong_problems`);
- a declaration the node cannot meet costs it leases: once promoted, the longer tasks it cannot finish
  expire, each a whole lease at 0 units in its history, which demotes it again;
- everything is read from events at a past block, so the worker, every validator and the trainer compute
  the same class for a claim, and nothing after the claim changes it.

`history=0` turns the rule off (the declared class is believed), for development pools only.

Pure functions, no chain access and no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from intellect.sdk import LeaseOutcome
from intellect.sdk.poolrules import DEFAULT_CLASS_HISTORY, DEFAULT_CLASS_LEASE_SHARE

__all__ = [
    "CLASSES",
    "DEFAULT_CLASS_HISTORY",
    "DEFAULT_CLASS_LEASE_SHARE",
    "ClassRule",
    "LeaseOutcome",
    "budget_class",
    "earned_class",
    "hardware_class",
    "lower_class",
    "verified_rate",
]

CLASSES = ("cpu", "gpu-small", "gpu-large")
"""Budget classes, lowest first."""


def hardware_class(gpu_model: str, vram_gib: int, gpu_count: int) -> str:
    """`cpu` (no GPU), `gpu-small` (< 40 GiB per GPU), `gpu-large` (≥ 40 GiB: A100-40/80, H100, H200)."""
    if gpu_count <= 0 or gpu_model.strip().lower() in ("", "cpu", "none"):
        return "cpu"
    return "gpu-large" if vram_gib >= 40 else "gpu-small"


def lower_class(a: str, b: str) -> str:
    """The lower of two classes (an unknown name counts as `cpu`)."""
    rank = {c: i for i, c in enumerate(CLASSES)}
    return a if rank.get(a, 0) <= rank.get(b, 0) else b


def verified_rate(outcomes: Sequence[LeaseOutcome]) -> float:
    """Verified tokens per lease-second over `outcomes` (0.0 for none)."""
    seconds = sum(max(1, int(o.seconds)) for o in outcomes)
    return sum(int(o.units) for o in outcomes if o.verified) / seconds if seconds else 0.0


@dataclass(frozen=True)
class ClassRule:
    """The pool's rule for earning a budget class."""

    history: int = DEFAULT_CLASS_HISTORY
    lease_share: float = DEFAULT_CLASS_LEASE_SHARE

    @classmethod
    def of(cls, history: int | None = None, lease_share: float | None = None) -> ClassRule:
        """The rule from the pool rules' optional fields (None: the default)."""
        return cls(DEFAULT_CLASS_HISTORY if history is None else int(history),
                   DEFAULT_CLASS_LEASE_SHARE if lease_share is None else float(lease_share))

    def thresholds(self, budgets: Mapping[str, Sequence[int]], group_size: int, problems_per_task: int,
                   lease_duration: int) -> dict[str, float]:
        """Verified tokens per lease-second each class needs: its full-length submission's units over
        `lease_share` of the lease (`cpu`: 0; a class without budgets has `cpu`'s)."""
        lease = max(1.0, float(lease_duration) * self.lease_share)
        out = {}
        for c in CLASSES:
            lengths = budgets.get(c) or budgets.get("cpu") or [0]
            out[c] = 0.0 if c == CLASSES[0] else max(int(x) for x in lengths) * group_size * problems_per_task / lease
        return out


def earned_class(outcomes: Sequence[LeaseOutcome], thresholds: Mapping[str, float], history: int) -> str:
    """The class a node's last `history` decided leases earn (see the module docstring); `history=0`: the
    highest (the rule is off)."""
    if history <= 0:
        return CLASSES[-1]
    last = list(outcomes)[-history:]
    if len(last) < history:
        return CLASSES[0]
    rate = verified_rate(last)
    earned = CLASSES[0]
    for c in CLASSES[1:]:
        if rate >= thresholds.get(c, float("inf")):
            earned = c
    return earned


def budget_class(declared: str, outcomes: Sequence[LeaseOutcome], thresholds: Mapping[str, float],
                 history: int) -> str:
    """The class a claim is judged by: the lower of the declared class and the earned one."""
    return lower_class(declared, earned_class(outcomes, thresholds, history))
