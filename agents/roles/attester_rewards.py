"""A validator's attester rewards (issue 21, AttesterBook): claim the reward of each of its recorded attestations
once it is payable, asking the chain only about the due ones. Called from the validator's settle pass."""

from __future__ import annotations

import logging
import threading
from typing import Any

from intellect.sdk import ContractRevert, TaskStatus

__all__ = ["ATTESTER_CLAIMS_PER_PASS", "claim_attester_rewards"]

log = logging.getLogger(__name__)

ATTESTER_CLAIMS_PER_PASS = 32  # due attester rewards asked (one eth_call each) per settle pass, at most


def claim_attester_rewards(protocol: Any, state: Any, *, lock: threading.Lock) -> int:
    """Claim the rewards of this validator's recorded attestations once they are payable; returns the wei paid.
    The unsettled set is the state store's `attester` records in status `recorded`: the event follower adds one per
    AttestationRecorded naming this validator, incrementally (its cursor is in the state store, its pages
    bounded), so nothing here reads the event log. A record costs no RPC while its submission's window is open or
    a challenge of it is open (both known locally, from WorkSubmitted and the challenge events); a due one is
    checked by one eth_call of `claimAttesterReward` (at most `ATTESTER_CLAIMS_PER_PASS` per pass, earliest window
    first) and leaves the set once paid, or found settled by someone else (AttesterBookBadRecord: paid, released or
    slashed), or never payable (its work upheld or voided); one not payable yet (a wiped worker's, say) is asked
    again after a back-off in chain time. Transactions are sent under `lock`."""
    me, paid = protocol.address, 0
    pending = state.records("attester", "recorded")
    if not pending:
        return 0
    now = protocol.chain_time()
    due: list[tuple[int, int]] = []
    tries: dict[int, int] = {}
    for r in pending:
        sid, d = int(r["id"]), r["data"]
        if "window_end" not in d:  # from the WorkSubmitted the follower kept, else (once) from the chain
            sub = state.record("submission", sid)
            end = (sub or {}).get("data", {}).get("window_end")
            if end is None:
                t = protocol.known_task(sid)
                if t is None:  # the chain lost the submission (a restart from an older state, a reorg)
                    state.put("attester", sid, "settled", {"task_status": "vanished"})
                    continue
                end = t.window_end
            d = {**d, "window_end": int(end)}
            state.put("attester", sid, "recorded", {"window_end": int(end)})
        challenge = state.record("challenge", sid)
        if (d["window_end"] > now or d.get("recheck_at", 0) > now
                or (challenge is not None and challenge["status"] in ("open", "opening"))):
            continue
        due.append((int(d["window_end"]), sid))
        tries[sid] = int(d.get("tries", 0))
    for _, sid in sorted(due)[:ATTESTER_CLAIMS_PER_PASS]:
        try:
            protocol.call("AttesterBook", "claimAttesterReward", sid, me)
        except ContractRevert as exc:
            if exc.name == "AttesterBookBadRecord":  # no longer reserved: paid (anyone may send it) or released
                state.put("attester", sid, "settled")
                continue
            t = protocol.known_task(sid)
            if t is None:  # the chain lost the submission: nothing to claim, ever
                state.put("attester", sid, "settled", {"task_status": "vanished"})
                continue
            if t.status in (TaskStatus.UPHELD, TaskStatus.VOIDED):  # never payable: released to the pool instead
                state.put("attester", sid, "settled", {"task_status": t.status.name.lower()})
                continue
            n = tries[sid] + 1
            state.put("attester", sid, "recorded", {"tries": n, "recheck_at": now + min(60 * 2**n, 86_400)})
            continue
        with lock:
            amount = protocol.claim_attester_reward(sid, me)
        state.put("attester", sid, "paid", {"amount": amount})
        paid += amount
    if paid:
        log.info("claimed %d wei of attester rewards", paid)
    return paid
