"""Which validators' attestations count for a submission, and when the trainer may train on it: the chain's
stake decides, never the number of keys or owners (issue 33: weight is stake, never keys).

    k = assignment_size(quorum, rules.assigned_validators)            # a pool rule, at least the quorum
    slots = assigned_validators(seed, stakes_at_claim, k, owners=owners_at_claim, exclude=(worker, worker_owner))
    ok = trainable(slots, attesters, quorum=quorum, waited_s=..., wait_s=...)

**The draw.** A submission has k slots. Slot i is filled by one stake unit drawn uniformly from the eligible
validators' stake at the claim's snapshot: r_i = keccak256(seed ‖ "intellect.assignment.slot" ‖ i) mod W, W the
eligible stake, and the slot goes to the validator whose interval of the cumulative stake (validators in address
order) holds r_i. Draws are with replacement: a validator drawn twice holds two slots, and its one attestation
fills both. So the number of slots an operator holds is Binomial(k, its share of stake), whatever the number of
keys or owners it splits that stake over: a split changes nothing, in expectation or in distribution (the
intervals of one operator's keys add up to the same length; r_i is uniform and unknown when the set is fixed).
The modulo bias is below W / 2**256 (< 2**-160 while the eligible stake is under 2**96 wei); the arithmetic is
integer: every node computes the same slots from the chain alone.

Why not the alternatives. (1) The rule before issue 33 ranked keys by keccak(seed ‖ address), one slot per owner:
24 attacker keys of 100 INTL under fresh owners against 8 honest validators of 1,000 INTL (23 % of the stake)
held ≥ 3 of 4 slots on 74 % of submissions (bench/security/assignment_capture.py), against 4.1 % for a
stake-proportional draw. (2) Weighted rendezvous without replacement (score -ln(u)/stake, the k lowest) is
stake-proportional for the first slot only: a key is drawn at most once, so splitting pays. The same bench
measures it (10,000 claims per split): at 23 % the attacker's capture is 0 with 1 or 2 keys (a key holds one
slot), 2.2 % with 4, 4.3 % with 24 and 4.5 % with 100 keys (stake-proportional: 4.1 %); honest operators with one
big key are under-represented the same way. (3) Dedupe after drawing with replacement favours splits the same way (a single key drawn
twice is one slot, two keys drawn once are two). Drawing with replacement and counting slots, not keys, is the
only one of these that is exactly split-proof, and it costs nothing on chain (pure function of chain data).

Kept from the earlier rule: the seed is the task claim's seed (keccak of the claim block's hash, the node and
the task id: `intellect.sdk.claim_seed`), so a worker cannot pick its validators; the set and stakes are those
active and staked at the end of the block before the claim's block (`intellect.sdk.ValidatorHistory`), so nothing
registered, staked or exited after the claim changes the draw; the worker's own operator (its key, its owner, and
validators owned by either) is left out (`exclude`). Slot i does not depend on k: a larger k extends the list.

**The trainer's rule** (`trainable`). A submission is trained on only when its attested slots (slots whose
validator sent a valid accepting attestation) are all of its k slots, or are at least the quorum and the
trainer has waited `wait_s` since it first saw the submission without the submission being challenged on-chain
(the trainer re-checks the chain status right before training). A stake share s therefore gets junk into a step
at once only when it holds all k slots (probability s**k: 0.28 % at s = 23 %, k = 4), and otherwise only if no
honest validator challenges within `wait_s` (the validator agents check their own slots and every challenged
submission, `validator.check`: so at least one honest slot holder online): every honest validator had the time to
object, none could be shut out by being outnumbered or outrun. Honest work whose every slot attests trains at once; honest
work with a slow or offline slot waits `wait_s` (docs/security.md, bench/security/assignment_capture.py).

The quorum itself (`effective_quorum`) is the pool's on-chain rule, never below `NON_DEV_MIN_QUORUM` off
development chains, and now counts slots (stake), not operators.

Pure functions, no chain access and no torch: the trainer, the validators and the tests share them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from itertools import accumulate

from eth_utils import keccak

from intellect.sdk import DEV_CHAIN_IDS

__all__ = [
    "DEV_CHAIN_IDS",
    "NON_DEV_MIN_QUORUM",
    "assigned_validators",
    "assignment_size",
    "attested_slots",
    "effective_quorum",
    "eligible_stakes",
    "slot_draw",
    "trainable",
]

NON_DEV_MIN_QUORUM = 2
"""Fewest attested slots (and fewest distinct eligible validators in the set) that make a submission trainable on
any chain other than a development one."""
MAX_ASSIGNED = 64
"""Most slots one submission is assigned (the pool rules' bound)."""
SLOT_TAG = b"intellect.assignment.slot"


def effective_quorum(configured: int | None, pool_quorum: int, chain_id: int) -> int:
    """Attested slots needed per submission: the pool's rule (`quorum`, the one its challenges use), at least
    `NON_DEV_MIN_QUORUM` off development chains, raised (never lowered) by the trainer's setting."""
    floor = 1 if chain_id in DEV_CHAIN_IDS else NON_DEV_MIN_QUORUM
    return max(floor, int(pool_quorum), int(configured or 0))


def assignment_size(quorum: int, rule: int | None = None) -> int:
    """How many slots each submission is assigned: the pool rule `assigned_validators` (default quorum + 1, so
    one slot may be offline), never fewer than the quorum."""
    return max(int(quorum), int(rule) if rule else int(quorum) + 1)


@lru_cache(maxsize=1 << 16)
def _address(a: str) -> str:
    s = str(a).lower()
    if len(s) != 42 or not s.startswith("0x"):
        raise ValueError(f"not an address: {a!r}")
    int(s[2:], 16)  # ValueError when not hex
    return s


def slot_draw(seed: bytes, slot: int) -> int:
    """keccak256(seed ‖ SLOT_TAG ‖ slot as 4 bytes) as an integer: slot `slot`'s uniform draw."""
    return int.from_bytes(keccak(bytes(seed) + SLOT_TAG + int(slot).to_bytes(4, "big")), "big")


def eligible_stakes(stakes: Mapping[str, int], *, owners: Mapping[str, str] | None = None,
                    exclude: Iterable[str] = ()) -> dict[str, int]:
    """{validator (lower case): stake} of the validators that may be assigned: positive stake, and neither the
    validator nor its owner in `exclude` (the worker and its owner)."""
    out_of = {_address(a) for a in exclude}
    own = {_address(v): _address(o) for v, o in owners.items()} if owners is not None and out_of else {}
    out: dict[str, int] = {}
    for v, stake in stakes.items():
        a, w = _address(v), int(stake)
        if w < 0:
            raise ValueError(f"negative stake {w} for {a}")
        if w == 0 or a in out_of or own.get(a, a) in out_of:
            continue
        out[a] = out.get(a, 0) + w
    return out


def assigned_validators(seed: bytes, stakes: Mapping[str, int], k: int, *, owners: Mapping[str, str] | None = None,
                        exclude: Iterable[str] = ()) -> list[str]:
    """The k slots (validators, lower case, slot 0 first; a validator may hold several) of the claim whose seed
    is `seed`: each slot a stake-weighted draw with replacement (module docstring).

    `stakes`: {validator: stake} of the set active and staked at the claim (case does not matter; a key given
    twice in different case counts once, its stakes added). `owners` maps validator → owner, used only with
    `exclude`: addresses (the worker and its owner) whose validators are left out, matched against each
    validator's address and its owner. An empty list when no eligible stake is left."""
    if not isinstance(seed, bytes | bytearray) or len(seed) == 0:
        raise ValueError("seed must be non-empty bytes")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    pool = eligible_stakes(stakes, owners=owners, exclude=exclude)
    if not pool:
        return []
    order = sorted(pool)
    ends = list(accumulate(pool[v] for v in order))  # validator j holds [ends[j-1], ends[j])
    total = ends[-1]
    return [order[bisect_right(ends, slot_draw(seed, i) % total)] for i in range(k)]


def attested_slots(slots: Sequence[str], attesters: Iterable[str]) -> int:
    """How many of `slots` belong to a validator in `attesters` (one attestation fills every slot its key holds)."""
    got = {_address(a) for a in attesters}
    return sum(1 for v in slots if _address(v) in got)


def trainable(slots: Sequence[str], attesters: Iterable[str], *, quorum: int, waited_s: float,
              wait_s: float) -> bool:
    """Whether the trainer may train on a submission whose slots are `slots` and whose valid accepting
    attestations came from `attesters` (module docstring): every slot attested, or at least `quorum` slots and
    `waited_s` ≥ `wait_s` (seconds since the trainer first saw it; the caller also checks it is not challenged)."""
    if quorum < 1:
        raise ValueError(f"quorum must be >= 1, got {quorum}")
    if len(slots) < quorum:
        return False
    n = attested_slots(slots, attesters)
    return n == len(slots) or (n >= quorum and waited_s >= wait_s)
