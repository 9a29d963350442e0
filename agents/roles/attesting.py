"""A validator's attestations: signed for accepted work (EIP-712, `intellect.agents.attestation`), kept in its state
store (kind `attestation`, id = submission id: `signed`, then `posted` or `refused`) and offered to the pool's
trainer by `POST /attestations` (the trainer can also pull them: `GET /attestations`, `_runtime.attestations_reply`).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from intellect.agents.attestation import sign_attestation
from intellect.agents.roles._runtime import MAX_ATTESTATIONS_PAGE
from intellect.sdk.http import PeerHttpError, fetch
from intellect.verifier.submission import Verdict

__all__ = ["keep_attestation", "post_attestations"]

log = logging.getLogger(__name__)


def keep_attestation(protocol: Any, state: Any, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
    """Sign the accepting attestation of submission `sid` (its `submission` record's data `sub`) with the
    validator's key and keep it, with the verdict, in one transaction of the state store."""
    att = sign_attestation(protocol.account.key, chain_id=protocol.chain_id,
                           ledger=protocol.contracts["TaskLedger"].address, submission_id=sid,
                           rollouts_cid=sub["rollouts_cid"], proofs_hash=sub["proofs_hash"],
                           policy_step=sub["policy_step"], accepted=True)
    with state.transaction():
        state.put("attestation", sid, "signed", {"attestation": json.loads(att.model_dump_json(by_alias=True))})
        state.put("submission", sid, "accepted", {"verdict": verdict.model_dump()})


def post_attestations(state: Any, url: str) -> int:
    """POST the signed, not yet posted attestations (a page at most) to the trainer at `url`; returns how many it
    took. One it refuses is kept as `refused` with its answer; a trainer not answering stops the pass (tried again
    on the next)."""
    posted = 0
    for r in state.records("attestation", "signed")[:MAX_ATTESTATIONS_PAGE]:
        try:
            resp = fetch("POST", url.rstrip("/") + "/attestations", json_body=r["data"]["attestation"],
                         deadline=5.0, max_bytes=64 * 1024)
        except PeerHttpError as exc:
            log.debug("posting attestation %s: %s", r["id"], exc)
            break
        text = resp.body.decode("utf-8", "replace")
        if resp.ok:
            state.put("attestation", r["id"], "posted")
            posted += 1
        else:
            log.warning("trainer refused attestation %s: %s", r["id"], text.strip()[:300])
            state.put("attestation", r["id"], "refused", {"error": text[:300]})
    return posted
