"""The validator agent: check every submission of the pool, attest good work, challenge bad work.

Follows `WorkSubmitted`, `ChallengeOpened`, `ChallengeResolved` and its own `AttestationRecorded`
(resumable cursor in the state store). Each submission is fetched (CID-verified, size-capped) and checked by
`intellect.verifier.submission.check_submission`, the protocol's acceptance rule (schema, claim,
assignment, checkpoint, prompts, completion ends, rewards and advantages, TOPLOC and the sampler
replay, cheapest first); the validator acts on the verdict:

Accepted → EIP-712 attestation, kept in the state store, POSTed to the pool trainer's
`/attestations` (retried; the trainer can also pull `GET /attestations?since=`). Rejected →
evidence JSON (reason code, failing statistics) on IPFS → `challenge(submission, evidenceCid)`.
Every open round of a submission it has a verdict for is voted on from that verdict, whoever opened it;
rounds whose vote period ended (or whose outcome is fixed) are resolved; a round that ended Rejected or
NoQuorum while its verdict rejects the work is challenged again inside the window (`accountability.
round_actions`, issue 33). Submissions are checked concurrently; `/metrics` has the backlog.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, NoReturn

from pydantic import BaseModel, ConfigDict, Field

from intellect.agents.attestation import sign_attestation
from intellect.agents.hardware import resolve
from intellect.agents.roles import evidence as worker_evidence
from intellect.agents.roles._inflight import InFlightChecks
from intellect.agents.roles._runtime import (
    MAX_ATTESTATIONS_PAGE,
    Agent,
    StateCursorStore,
    attestations_reply,
    bare_hex,
    load_task_set,
)
from intellect.agents.roles.accountability import round_actions, slash_losing_voters
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.budget_class import BudgetClasses
from intellect.agents.roles.pool_rules import apply_pool_rules
from intellect.sdk import ContractRevert, EventStream, IntellectError, IpfsError, TaskStatus
from intellect.sdk.http import PeerHttpError, fetch
from intellect.sdk.shardcast import Client, SourceReputation
from intellect.verifier.assignment import assignment_size, effective_quorum
from intellect.verifier.evidence import rules_for_profile
from intellect.verifier.isolation import ParseUnavailable
from intellect.verifier.submission import (
    Checkpoint,
    Claim,
    Rejection,
    SubmissionRules,
    Verdict,
    check_submission,
)

__all__ = ["EVIDENCE_SCHEMA", "Evidence", "Rejection", "Validator", "Verdict"]

log = logging.getLogger(__name__)

EVIDENCE_SCHEMA = "intellect.evidence/v1"
ATTESTER_CLAIMS_PER_PASS = 32  # due attester rewards asked (one eth_call each) per settle pass, at most
MAX_CHECK_CRASHES = 2  # a submission whose check ended the validator's process this often is given up


class Evidence(BaseModel):
    """What a challenge points to (JSON on IPFS, schema `intellect.evidence/v1`)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: str = Field(EVIDENCE_SCHEMA, alias="schema")
    submission_id: int
    rollouts_cid: str
    node: str
    reason: str
    detail: str
    stats: dict[str, Any] = Field(default_factory=dict)
    validator: str
    checked_at: float


class _Unavailable(IntellectError):
    """The rollout file could not be fetched (yet)."""


class Validator(Agent):
    role = "validator"
    node_role = "validator"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self._load_counters("verified", "accepted", "rejected", "ambiguous", "challenged", "votes", "resolved",
                            "attestations_posted")
        self.evidence_rules = rules_for_profile(cfg.validator.toploc_profile)  # issue 35: evidence per worker
        self.metrics.declare("backlog", "gauge", "submissions waiting for or under verification")
        self.metrics.declare("verdicts_total", "counter", "verdicts by outcome and reason")
        self.metrics.declare("verify_seconds_total", "counter", "time spent verifying")
        self._models: OrderedDict[int, Checkpoint] = OrderedDict()
        self.task_set: Any = None  # loaded in start()
        self._model_lock = threading.Lock()
        self._shardcast_reputation: Any = None
        self._inflight: dict[int, Future[Any]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._tx_lock = threading.Lock()  # one challenge at a time: its bond approval must not race
        self._published = -1  # newest checkpoint step seen in CheckpointPublished events
        self._preloaded = -1
        self._preloader: threading.Thread | None = None
        self._checks = InFlightChecks(self.state)

    # -- set-up --------------------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        v = self.cfg.validator

        # the pool's rules before registering and staking: a contradicting configuration stops here
        self.refresh_ipfs_peers()
        self.rules = apply_pool_rules(self.cfg, self.pool.params.rules_cid, self.ipfs, self.pool_id)
        self.ensure_node(stake_amount=v.stake_amount, auto_stake=v.auto_stake)
        self.refresh_ipfs_peers()
        self.task_set = load_task_set(self.cfg.tasks, self.rules.taskset_cid if self.rules else
                                      self.pool.params.rules_cid, self.ipfs)
        self.classes = BudgetClasses(self.protocol, self.pool_id, self.pool.params, self.cfg)
        assert self.server is not None
        self.server.route("GET", "/attestations", self._get_attestations)
        self._executor = ThreadPoolExecutor(max_workers=v.concurrency, thread_name_prefix="verify")
        self._closers.append(lambda: self._executor.shutdown(wait=False, cancel_futures=True)
                             if self._executor else None)
        self._recover_checks()

    def _recover_checks(self) -> None:
        """Checks in flight when the last process ended ended it (`_inflight`): count them; a submission whose
        check did so `MAX_CHECK_CRASHES` times is given up: no vote, no challenge, shown in `/status`."""
        for sid, crashes in self._checks.recover():
            if crashes >= MAX_CHECK_CRASHES:
                log.error("submission %d: its check ended this validator's process %d times; given up", sid, crashes)
                self.state.put("submission", sid, "given_up",
                               {"given_up": f"its check ended the validator's process {crashes} times"})
            else:
                log.warning("submission %d: its check ended the last process; checked again, alone", sid)

    def _get_attestations(self, query: dict[str, list[str]], _body: Any) -> Any:
        """`GET /attestations?since=T&after=ID&limit=N`: a page of this validator's attestations
        (`attestations_reply`: an index seek that costs the page, rate-limited per client)."""
        return attestations_reply(self.state, query)

    # -- events --------------------------------------------------------------------------------
    def on_event(self, e: Any) -> None:
        a = e.args
        if e.event == "WorkSubmitted":
            if int(a["poolId"]) != self.pool_id:
                return
            sid = int(a["submissionId"])
            if self.state.record("submission", sid) is None:
                self.state.put("submission", sid, "queued", {
                    "node": a["node"], "rollouts_cid": a["rolloutsCid"],
                    "proofs_hash": "0x" + (a["proofsHash"] if isinstance(a["proofsHash"], str)
                                           else bytes(a["proofsHash"]).hex()).removeprefix("0x"),
                    "work_units": int(a["workUnits"]), "policy_step": int(a["policyStep"]),
                    "window_end": int(a["windowEnd"]), "attempts": 0,
                })
        elif e.event == "TaskClaimed":
            if int(a["poolId"]) == self.pool_id:  # its seed, for checking the submission that follows
                self.state.put("claim", int(a["taskId"]), "claimed", {"seed": bare_hex(a["seed"]), "block": e.block_number,
                                                                      "node": a["node"]})
        elif e.event == "CheckpointPublished":
            if int(a["poolId"]) == self.pool_id:
                self._published = max(self._published, int(a["step"]))
        elif e.event == "ChallengeOpened":
            cid = int(a["challengeId"])
            if self.state.record("submission", cid) is None:
                return  # another pool's submission
            old = self.state.record("challenge", cid)
            rnd = int(a.get("round", 1))
            # a round that ended Rejected or NoQuorum may be followed by another inside the window: vote again
            if old is None or old["status"] in ("opening", "rejected", "no_quorum") or int(old["data"].get("round", 0)) < rnd:
                mine = a["challenger"].lower() == self.protocol.address.lower()
                own = list((old or {}).get("data", {}).get("own") or [])
                self.state.put("challenge", cid, "open", {"challenger": a["challenger"], "vote_end": int(a["voteEnd"]),
                                                          "evidence_cid": a["evidenceCid"], "node": a["node"],
                                                          "mine": mine, "voted": False, "voters_slashed": False,
                                                          "round": rnd, "own": sorted({*own, rnd} if mine else set(own))})
        elif e.event == "ChallengeResolved":
            cid = int(a["challengeId"])
            if self.state.record("challenge", cid) is not None:
                outcome = {2: "upheld", 3: "rejected", 4: "no_quorum"}.get(int(a.get("outcome", 0)))
                self.state.put("challenge", cid, outcome or ("upheld" if a["upheld"] else "rejected"),
                               {"slashed": int(a["slashed"])})
        elif e.event == "AttestationRecorded" and a["validator"].lower() == self.protocol.address.lower():
            self.state.put("attester", int(a["submissionId"]), "recorded", {"reward": int(a["reward"])})

    def _follow(self) -> None:
        events = ["TaskClaimed", "WorkSubmitted", "ChallengeOpened", "ChallengeResolved", "CheckpointPublished"]
        if "AttesterBook" in self.protocol.contracts:  # optional contract (issue 21)
            events.append("AttestationRecorded")
        stream = EventStream(self.protocol, events,
                             cursor_store=StateCursorStore(self.state, "validator"),
                             confirmations=self.cfg.chain.confirmations, poll_interval=0.5)
        self._stream = stream
        while not self.stop_event.is_set():
            try:
                stream.run(self.on_event, until=self.stop_event.is_set)
            except Exception:
                log.exception("event stream failed; restarting it")
                self.wait(2.0)

    # -- checkpoints ---------------------------------------------------------------------------
    def checkpoint_model(self, step: int) -> Checkpoint:
        """(model, tokenizer, manifest CID) of the pool's on-chain checkpoint `step` (fetched via Shardcast, cached)."""
        with self._model_lock:
            if step in self._models:
                self._models.move_to_end(step)
                return self._models[step]
            from transformers import AutoModelForCausalLM, AutoTokenizer

            cid = self.protocol.checkpoint(self.pool_id, step).manifest_cid
            out = self.data_dir / "checkpoints" / f"step-{step}"
            if not (out / "config.json").is_file():
                assert self.directory is not None
                sources = self.shardcast_sources()
                self.refresh_ipfs_peers(extra=[self.directory.service(self.pool.params.trainer, "ipfs") or ""])
                out.parent.mkdir(parents=True, exist_ok=True)
                if self._shardcast_reputation is None:  # corrupt-shard benches outlive one fetch
                    self._shardcast_reputation = SourceReputation()
                prev = out.parent / f"step-{step - 1}"  # a delta against it when held, else the full checkpoint
                Client(relays=sources, ipfs=self.ipfs, fsync=False, reputation=self._shardcast_reputation).fetch(
                    cid, out, base=prev if (prev / "config.json").is_file() else None)
            import torch

            device, dtype = resolve(self.cfg.validator.device, self.cfg.validator.dtype, "validator")
            model = AutoModelForCausalLM.from_pretrained(str(out), dtype=getattr(torch, dtype)).to(device).eval()
            tok = AutoTokenizer.from_pretrained(str(out))
            self._models[step] = Checkpoint(model, tok, cid)
            while len(self._models) > self.cfg.validator.cached_checkpoints:
                self._models.popitem(last=False)
            return self._models[step]

    def _preload_latest(self) -> None:
        """Fetch and load the newest published checkpoint in the background as soon as it is posted,
        so the first submission of a step does not wait for the model (Shardcast fetch + load)."""
        step = self._published
        if step <= self._preloaded or (self._preloader is not None and self._preloader.is_alive()):
            return

        def run() -> None:
            t0 = time.perf_counter()
            try:
                self.checkpoint_model(step)
                log.info("preloaded checkpoint step %d in %.2fs", step, time.perf_counter() - t0)
                self._preloaded = step
            except Exception as exc:  # retried on the next loop turn; verification loads it anyway
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.warning("preloading checkpoint step %d failed: %r", step, exc)

        self._preloader = threading.Thread(target=run, name="preload", daemon=True)
        self._preloader.start()

    def claim_seed(self, task_id: int) -> bytes:
        """The chain-drawn seed of task `task_id`'s claim: from the TaskClaimed event the follower kept (it
        precedes the WorkSubmitted event); the event log is searched only for a claim the follower did not
        see (a cursor from before claims were followed)."""
        rec = self.state.record("claim", task_id)
        if rec is not None:
            return bytes.fromhex(rec["data"]["seed"])
        evs = self.protocol.get_events(["TaskClaimed"], filters={"taskId": task_id})
        if not evs:
            self._claim_event_missing(task_id)
        seed = bare_hex(evs[-1].args["seed"])
        self.state.put("claim", task_id, "claimed", {"seed": seed})
        return bytes.fromhex(seed)

    def claim_class(self, task_id: int, node: str) -> str:
        """The budget class task `task_id`'s claim is judged by (`BudgetClasses`: the lower of the node's declared
        class and the class its verified history earns, as of the block before the claim's block)."""
        rec = self.state.record("claim", task_id)
        block = rec["data"].get("block") if rec is not None else None
        if block is None:
            block = self.classes.claim_block(task_id)
        if block is None:
            self._claim_event_missing(task_id)
        return self.classes.class_at(node, int(block))

    def _claim_event_missing(self, task_id: int) -> NoReturn:
        """No TaskClaimed event for a task: a rejection only when the ledger has no such task. A task the ledger
        holds was claimed (submitWork takes only the claimant), so a missing event is this node's RPC missing
        logs (a node restarted from a state dump, a pruned provider): no verdict now, judged later, given up
        when the window closes (`ParseUnavailable`), never a slash on what this node could not see."""
        try:
            known = self.protocol.task(task_id).status != TaskStatus.NONE
        except ContractRevert as exc:
            if exc.name != "TaskLedgerUnknownTask":
                raise
            known = False
        if not known:
            raise Rejection("unknown_task", f"no TaskClaimed event for task {task_id}")
        raise ParseUnavailable(f"task {task_id} is on the ledger but this node's RPC returns no TaskClaimed event for "
                               f"it (its claim seed and block are unknown here)")

    # -- verification --------------------------------------------------------------------------
    def fetch_rollouts(self, sid: int, sub: dict[str, Any]) -> bytes:
        assert self.directory is not None
        try:
            self.refresh_ipfs_peers(extra=[self.directory.service(sub["node"], "ipfs") or ""])
            return self.ipfs.cat(sub["rollouts_cid"], max_size=self.cfg.ipfs.max_fetch_bytes)
        except IpfsError as exc:
            if type(exc).__name__ in ("ContentTooLargeError", "CidMismatchError", "InvalidCidError"):
                raise Rejection("bad_cid", str(exc)) from None
            raise _Unavailable(str(exc)) from None

    def submission_rules(self) -> SubmissionRules:
        """The pool's rules a submission is checked against: this validator's settings, as the pool's
        on-chain rules (if any) fixed them."""
        w, t = self.cfg.worker, self.cfg.tasks
        pool_rules = getattr(self, "rules", None)
        chat = "model" if pool_rules is not None and pool_rules.model.chat_template != "none" else "none"
        return SubmissionRules(problems_per_task=w.problems_per_task, group_size=w.group_size,
                               length_alpha=t.length_alpha, length_scope=t.length_scope, temperature=t.temperature,
                               budgets=t.budgets, problem_order=t.problem_order,
                               chat_template=chat, toploc_profile=self.cfg.validator.toploc_profile)

    def verify_submission(self, sid: int, sub: dict[str, Any]) -> Verdict:
        """Fetch the rollout file and run `check_submission` on it: a failed check is a rejecting verdict;
        a file that cannot be fetched yet raises `_Unavailable`."""
        t0 = time.perf_counter()
        try:
            data = self.fetch_rollouts(sid, sub)
        except Rejection as rej:
            return Verdict(submission_id=sid, accepted=False, reason=rej.reason, detail=rej.detail, stats=rej.stats,
                           seconds=time.perf_counter() - t0)

        claim = Claim(submission_id=sid, node=sub["node"], policy_step=sub["policy_step"],
                      proofs_hash=sub["proofs_hash"], work_units=sub["work_units"], rollouts_cid=sub["rollouts_cid"],
                      seed=lambda: self.claim_seed(sid), budget_class=lambda: self.claim_class(sid, sub["node"]))
        verdict = check_submission(data, claim, self.task_set, self.submission_rules(), self.checkpoint_model,
                                   evidence=self.evidence_rules)
        return verdict.model_copy(update={"seconds": time.perf_counter() - t0})

    # -- acting on verdicts --------------------------------------------------------------------
    def _process(self, sid: int) -> None:
        rec = self.state.record("submission", sid)
        if rec is None or rec["status"] != "queued":
            return
        sub = rec["data"]
        try:
            with self._checks.running(sid):
                verdict = self.verify_submission(sid, sub)
        except ParseUnavailable as exc:  # this node could not run the parser to its end: no verdict, later
            attempts = int(sub.get("parse_attempts", 0)) + 1
            if int(sub.get("window_end", 0)) > self.protocol.chain_time():
                log.warning("submission %d: cannot judge the file now (%s); attempt %d", sid, exc, attempts)
                self.state.put("submission", sid, "queued",
                               {"parse_attempts": attempts, "retry_at": time.time() + min(10 * attempts, 300)})
            else:
                log.error("submission %d: given up, its window closed before this node could judge it: %s", sid, exc)
                self.state.put("submission", sid, "given_up", {"given_up": f"could not judge it: {exc}"[:300]})
            return
        except _Unavailable as exc:
            attempts = int(sub.get("attempts", 0)) + 1
            # Keep trying while the window leaves time to challenge: a worker whose IPFS is down for a while
            # must not have honest work slashed as "unavailable" (fetch_attempts is the minimum of tries).
            margin = max(60, self.pool.params.window_length // 10)
            window_left = int(sub.get("window_end", 0)) - self.protocol.chain_time()
            if attempts < self.cfg.validator.fetch_attempts or window_left > margin:
                log.warning("submission %d: rollout file unavailable (%s); attempt %d", sid, exc, attempts)
                self.state.put("submission", sid, "queued",
                               {"attempts": attempts, "retry_at": time.time() + min(2 * attempts, 30)})
                return
            verdict = Verdict(submission_id=sid, accepted=False, reason="unavailable",
                              detail=f"rollout file {sub['rollouts_cid']} not retrievable after {attempts} tries: {exc}")
        if verdict.outcome == "ambiguous" and self.cfg.validator.evidence != "enforce":  # issue 35, not enforced
            log.info("submission %d would be ambiguous (%s); attested: validator.evidence is %s", sid, verdict.detail,
                     self.cfg.validator.evidence)
            verdict = Verdict.model_validate({**verdict.model_dump(), "accepted": True, "outcome": "accept"})
        self.count("verified")
        self.metrics.inc("verdicts_total", outcome="accepted" if verdict.accepted else "rejected",
                         reason=verdict.reason or "ok")
        self.metrics.inc("verify_seconds_total", verdict.seconds)
        if verdict.accepted:
            self.count("accepted")
            self._attest(sid, sub, verdict)
        elif verdict.outcome == "ambiguous":  # issue 35: no attestation, no challenge; its evidence accumulates
            self.count("ambiguous")
            log.warning("submission %d ambiguous: %s", sid, verdict.detail)
            self.state.put("submission", sid, "ambiguous", {"verdict": verdict.model_dump()})
        else:
            self.count("rejected")
            log.warning("submission %d rejected: %s (%s)", sid, verdict.reason, verdict.detail)
            self.state.put("submission", sid, "rejected", {"verdict": verdict.model_dump()})
            self._challenge(sid, sub, verdict)
        if verdict.outcome != "reject":
            self.add_evidence(sid, sub, verdict)

    def add_evidence(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        """Add a judged submission's LLR to its worker's evidence (state store); a worker whose evidence crosses
        h is challenged on the newest cited submission still in its window (`intellect.agents.roles.evidence`)."""
        if self.cfg.validator.evidence == "off":
            return
        ev = worker_evidence.record_verdict(self.state, self.evidence_rules, sid, sub, verdict.llr)
        if ev is None or not ev.flagged or self.cfg.validator.evidence != "enforce":
            return
        worker = str(sub["node"]).lower()
        rec = self.state.record(worker_evidence.KIND, worker)
        if rec is not None and rec["status"] == "challenged":
            return
        if (open_id := worker_evidence.open_challenge(self.state, worker)) is not None:  # one challenge at a time
            self.state.put(worker_evidence.KIND, worker, "challenged", {"challenged": open_id})
            return
        target = worker_evidence.flagged_target(self.state, ev, self.protocol.chain_time())
        if target is None:
            log.error("worker %s flagged, but no cited submission is still in its window", worker)
            return
        claim = ev.claim(self.evidence_rules)
        run, total = ev.cited()
        flag = Verdict(submission_id=target, accepted=False, outcome="reject", reason=worker_evidence.EVIDENCE_REASON,
                       detail=f"{len(run)} consecutive submissions of {worker}, evidence {total:.2f} ≥ "
                              f"h = {self.evidence_rules.threshold:.2f}",
                       stats={"evidence": json.loads(claim.model_dump_json(by_alias=True))})
        tsub = self.state.record("submission", target)
        assert tsub is not None
        self._challenge(target, tsub["data"], flag)
        self.state.put(worker_evidence.KIND, worker, "challenged", {"challenged": target})

    def vote_of(self, challenge: dict[str, Any], sub: dict[str, Any]) -> bool | None:
        """How this validator votes on an open challenge (None: not now): its own verdict of the submission, or,
        for a challenge of a flagged worker, its own recomputation of the cited evidence (issue 35); it never
        upholds a challenge of a submission it found ambiguous on that submission's own grounds."""
        if sub["status"] == "rejected":
            return True
        cid = challenge.get("evidence_cid")
        claim = None
        if cid and self.ipfs is not None:
            try:
                claim = worker_evidence.claim_of(self.ipfs.cat(cid, max_size=1 << 20))
            except Exception as exc:  # the challenger's evidence must be retrievable: judged without it
                log.warning("evidence %s of a challenge not retrievable: %s", cid, exc)
        if claim is not None:
            uphold, why = worker_evidence.vote_on_claim(self.state, self.evidence_rules, claim,
                                                        str(challenge.get("node") or sub["data"]["node"]))
            log.info("evidence claim against %s: %s (%s)", claim.worker, uphold, why)
            return uphold
        return False if sub["status"] == "accepted" else None

    def _attest(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        att = sign_attestation(self.protocol.account.key, chain_id=self.protocol.chain_id,
                               ledger=self.protocol.contracts["TaskLedger"].address, submission_id=sid,
                               rollouts_cid=sub["rollouts_cid"], proofs_hash=sub["proofs_hash"],
                               policy_step=sub["policy_step"], accepted=True)
        with self.state.transaction():
            self.state.put("attestation", sid, "signed", {"attestation": json.loads(att.model_dump_json(by_alias=True))})
            self.state.put("submission", sid, "accepted", {"verdict": verdict.model_dump()})
        log.info("submission %d accepted (%.2fs)", sid, verdict.seconds)
        self._post_attestations()

    def _challenge(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        with self._tx_lock:
            self._challenge_locked(sid, sub, verdict)

    def _challenge_locked(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        t = self.protocol.task(sid)
        if t.status == TaskStatus.CHALLENGED:  # already challenged (by us before a crash, or by another validator)
            self._track_challenge(sid, sub["node"])
            return
        if t.status != TaskStatus.SUBMITTED:
            self.state.put("challenge", sid, "moot", {"task_status": t.status.name.lower()})
            return
        if self.protocol.chain_time() >= t.window_end:
            self.state.put("challenge", sid, "too_late")
            log.error("submission %d: window closed before the challenge", sid)
            return
        rec = self.state.record("challenge", sid)
        # our own evidence of an attempt that did not go through; a round someone else opened had theirs
        cid = rec["data"].get("evidence_cid") if rec is not None and rec["status"] == "opening" else None
        if not cid:
            ev = Evidence(submission_id=sid, rollouts_cid=sub["rollouts_cid"], node=sub["node"],
                          reason=verdict.reason or "rejected", detail=verdict.detail[:2000], stats=verdict.stats,
                          validator=self.protocol.address, checked_at=time.time())
            cid = self.ipfs.add(ev.model_dump_json(by_alias=True).encode())
        self.state.put("challenge", sid, "opening", {"evidence_cid": cid, "reason": verdict.reason, "node": sub["node"]})
        try:
            self.protocol.challenge(sid, cid)
        except ContractRevert as exc:
            if exc.name == "TaskLedgerAlreadyChallenged":
                self._track_challenge(sid, sub["node"])
                return
            raise
        self._track_challenge(sid, sub["node"])
        self.count("challenged")
        log.warning("challenged submission %d of %s: %s (evidence %s)", sid, sub["node"], verdict.reason, cid)

    def _track_challenge(self, sid: int, node: str) -> None:
        info = self.protocol.challenge_info(sid)
        mine = info.challenger.lower() == self.protocol.address.lower()
        status = info.status.name.lower()
        old = (self.state.record("challenge", sid) or {}).get("data", {})
        own = set(old.get("own") or []) | ({int(info.round)} if mine else set())
        same_round = int(old.get("round", 0)) == int(info.round)
        self.state.put("challenge", sid, status, {"challenger": info.challenger, "vote_end": info.vote_end,
                                                  "node": node, "mine": mine, "round": int(info.round),
                                                  "own": sorted(own),
                                                  "voters_slashed": bool(old.get("voters_slashed")) and same_round})

    def _post_attestations(self) -> None:
        pending = self.state.records("attestation", "signed")
        if not pending:
            return
        url = self.cfg.validator.trainer_url
        if not url and self.directory is not None:
            node = self.directory.node(self.pool.params.trainer)
            url = node.endpoint or None
        if not url:
            return

        for r in pending[:MAX_ATTESTATIONS_PAGE]:
            try:
                resp = fetch("POST", url.rstrip("/") + "/attestations", json_body=r["data"]["attestation"],
                             deadline=5.0, max_bytes=64 * 1024)
            except PeerHttpError as exc:
                log.debug("posting attestation %s: %s", r["id"], exc)
                return
            text = resp.body.decode("utf-8", "replace")
            if resp.ok:
                self.state.put("attestation", r["id"], "posted")
                self.count("attestations_posted")
            else:
                log.warning("trainer refused attestation %s: %s", r["id"], text.strip()[:300])
                self.state.put("attestation", r["id"], "refused", {"error": text[:300]})

    def _votes_and_resolutions(self) -> None:
        """Send what `round_actions` asks for (issue 33): a vote in every open round of a submission this validator
        has a verdict for, the resolution of rounds that can be resolved, and a new round for work its verdict
        rejects whose last round ended Rejected or NoQuorum inside the window. Each failure is logged; the rest
        still go."""
        for act in round_actions(self.protocol, self.state, vote_of=self.vote_of):
            cid = act.challenge_id
            try:
                if act.kind == "vote":
                    with self._tx_lock:
                        self.protocol.vote(cid, act.uphold)
                    self.count("votes")
                    log.info("voted %s on challenge %d (round %d)", "uphold" if act.uphold else "reject", cid, act.round)
                    self.state.put("challenge", cid, "open", {"voted": True, "voted_round": act.round})
                elif act.kind == "resolve":
                    with self._tx_lock:
                        upheld = self.protocol.resolve(cid)
                    self.count("resolved")
                    log.info("resolved challenge %d: %s", cid, "upheld" if upheld else "not upheld")
                else:
                    sub = self.state.record("submission", cid)
                    assert sub is not None  # round_actions re-challenges only work this validator rejected
                    log.warning("submission %d: round %d of its challenge ended without upholding it; this "
                                "validator's verdict rejects it: challenging again", cid, act.round)
                    self._challenge(cid, sub["data"], Verdict.model_validate(sub["data"]["verdict"]))
            except ContractRevert as exc:
                if exc.name == "TaskLedgerAlreadyVoted":
                    self.state.put("challenge", cid, "open", {"voted": True, "voted_round": act.round})
                elif exc.name != "TaskLedgerChallengeNotOpen":
                    log.warning("%s on challenge %d refused: %s", act.kind, cid, exc)
            except Exception as exc:  # this action again next pass; the others still go now
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.warning("%s on challenge %d failed (retried later): %r", act.kind, cid, exc)
                continue
            if act.kind == "resolve":
                info = self.protocol.challenge_info(cid)
                if info.status.name.lower() in ("upheld", "rejected", "no_quorum"):
                    self.state.put("challenge", cid, info.status.name.lower())

    def _settle(self) -> None:
        """Issue 21's follow-ups, each guarded (a failure logs and is tried again on the next pass): claim the
        attester rewards of this validator's recorded attestations whose windows closed (AttesterBook), and
        slash the losing voters of resolved challenges this validator took part in (`accountability`), and
        after a challenge of ours is upheld, void the slashed worker's other wiped submissions (frees their
        reservations in the ledger; `voidSubmissions`, checked by eth_call first so one bad id sends nothing)."""
        try:
            self._claim_attester_rewards()
        except Exception as exc:
            self.metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("claiming attester rewards failed (retried later): %s", exc)
        if self.cfg.validator.slash_losing_voters and "AttesterBook" in self.protocol.contracts:
            try:  # losing voters of challenges we took part in (issue 21)
                slash_losing_voters(self.protocol, self.state, lock=self._tx_lock)
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.warning("slashing losing voters failed (retried later): %s", exc)
        for r in self.state.records("challenge", "upheld"):
            if not r["data"].get("mine") or r["data"].get("voided_done"):
                continue
            node = str(r["data"].get("node") or "").lower()
            candidates = [int(s["id"]) for s in self.state.records("submission")
                          if int(s["id"]) != int(r["id"]) and str(s["data"].get("node", "")).lower() == node]
            void = []
            try:
                for sid in candidates:
                    try:
                        self.protocol.call("TaskLedger", "voidSubmissions", [sid])
                        void.append(sid)
                    except ContractRevert:
                        pass  # not submitted any more, or not wiped by the slash
                if void:
                    with self._tx_lock:
                        released = self.protocol.void_submissions(void)
                    log.info("voided %d wiped submission(s) of %s after challenge %s: %d wei released",
                             len(void), node, r["id"], released)
                self.state.put("challenge", r["id"], "upheld", {"voided_done": True, "voided": void})
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.warning("voiding the wiped submissions of %s failed (retried later): %s", node, exc)

    def _claim_attester_rewards(self) -> None:
        """Claim the rewards of this validator's recorded attestations once they are payable. The unsettled set
        is the state store's `attester` records in status `recorded`: the event follower adds one per
        AttestationRecorded naming this validator, incrementally (its cursor is in the state store, its pages
        bounded), so nothing here reads the event log. A record costs no RPC while its submission's window is
        open or a challenge of it is open (both known locally, from WorkSubmitted and the challenge events); a
        due one is checked by one eth_call of `claimAttesterReward` (at most `ATTESTER_CLAIMS_PER_PASS` per
        pass, earliest window first) and leaves the set once paid, or found settled by someone else
        (AttesterBookBadRecord: paid, released or slashed), or never payable (its work upheld or voided); one
        not payable yet (a wiped worker's, say) is asked again after a back-off in chain time."""
        me, paid = self.protocol.address, 0
        pending = self.state.records("attester", "recorded")
        if not pending:
            return
        now = self.protocol.chain_time()
        due: list[tuple[int, int]] = []
        tries: dict[int, int] = {}
        for r in pending:
            sid, d = int(r["id"]), r["data"]
            if "window_end" not in d:  # from the WorkSubmitted the follower kept, else (once) from the chain
                sub = self.state.record("submission", sid)
                end = (sub or {}).get("data", {}).get("window_end") or self.protocol.task(sid).window_end
                d = {**d, "window_end": int(end)}
                self.state.put("attester", sid, "recorded", {"window_end": int(end)})
            challenge = self.state.record("challenge", sid)
            if (d["window_end"] > now or d.get("recheck_at", 0) > now
                    or (challenge is not None and challenge["status"] in ("open", "opening"))):
                continue
            due.append((int(d["window_end"]), sid))
            tries[sid] = int(d.get("tries", 0))
        for _, sid in sorted(due)[:ATTESTER_CLAIMS_PER_PASS]:
            try:
                self.protocol.call("AttesterBook", "claimAttesterReward", sid, me)
            except ContractRevert as exc:
                if exc.name == "AttesterBookBadRecord":  # no longer reserved: paid (anyone may send it) or released
                    self.state.put("attester", sid, "settled")
                    continue
                status = self.protocol.task(sid).status
                if status in (TaskStatus.UPHELD, TaskStatus.VOIDED):  # never payable: released to the pool instead
                    self.state.put("attester", sid, "settled", {"task_status": status.name.lower()})
                    continue
                n = tries[sid] + 1
                self.state.put("attester", sid, "recorded", {"tries": n, "recheck_at": now + min(60 * 2**n, 86_400)})
                continue
            with self._tx_lock:
                amount = self.protocol.claim_attester_reward(sid, me)
            self.state.put("attester", sid, "paid", {"amount": amount})
            paid += amount
        if paid:
            log.info("claimed %d wei of attester rewards", paid)

    def _dispatch(self) -> None:
        assert self._executor is not None
        for sid, fut in list(self._inflight.items()):
            if fut.done():
                del self._inflight[sid]
                exc = fut.exception()
                if exc is not None:
                    self.metrics.inc("errors_total", kind=type(exc).__name__)
                    log.error("verifying submission %d failed: %r", sid, exc)
        now = time.time()
        queued = self.state.records("submission", "queued")
        queued.sort(key=lambda r: not self._assigned_to_me(int(r["id"])))  # assigned ones first (stable)
        suspects = self._checks.suspects()
        waiting = [r for r in queued if int(r["id"]) in suspects and r["data"].get("retry_at", 0) <= now]
        if waiting or suspects & set(self._inflight):  # a check that ended the process before runs alone
            queued = waiting[:1] if not self._inflight else []
        for r in queued:
            sid = int(r["id"])
            if sid in self._inflight or r["data"].get("retry_at", 0) > now:
                continue
            if len(self._inflight) >= self.cfg.validator.concurrency * 2:
                break
            self._inflight[sid] = self._executor.submit(self._process, sid)
        self.metrics.set("backlog", self.state.count("submission", "queued"))

    def _assigned_to_me(self, sid: int) -> bool:
        """Whether the chain assigned submission `sid` to this validator (`intellect.verifier.assignment`: only
        assigned validators' attestations count towards the trainer's quorum, so those are checked first; any
        other submission is still checked, and challenged when bad). Kept once known; False while unknown."""
        rec = self.state.record("assignment", sid)
        if rec is not None:
            return bool(rec["data"]["mine"])

        try:
            if getattr(self, "_assigner", None) is None:
                quorum = effective_quorum(None, self.pool.params.quorum, self.protocol.chain_id)
                rules = getattr(self, "rules", None)
                k = assignment_size(quorum, rules.assigned_validators if rules is not None else None)
                self._assigner = Assigner(self.protocol, k=k, quorum=quorum)
            c = (self.state.record("claim", sid) or {}).get("data", {})
            claim = (bytes.fromhex(c["seed"]), int(c["block"]), c["node"]) if "block" in c else None
            validators = self._assigner.for_task(sid, claim)
        except IntellectError as exc:
            log.debug("submission %d: assignment not readable yet: %s", sid, exc)
            return False
        if validators is None:
            return False
        mine = self.protocol.address.lower() in validators
        self.state.put("assignment", sid, "assigned", {"validators": validators, "mine": mine})
        return mine

    def loop(self) -> None:
        follower = threading.Thread(target=self._follow, name="events", daemon=True)
        follower.start()
        last_peers = last_settle = 0.0
        while not self.stop_event.is_set():
            try:
                self._preload_latest()
                self._dispatch()
                self._post_attestations()
                self._votes_and_resolutions()
                if time.monotonic() - last_settle > 15:
                    last_settle = time.monotonic()
                    self._settle()
                # a rejected verdict whose challenge transaction did not go through (crash, revert)
                for r in self.state.records("challenge", "opening"):
                    sub = self.state.record("submission", r["id"])
                    if (sub is not None and sub["status"] == "rejected" and int(r["id"]) not in self._inflight
                            and time.time() - r["updated_at"] > 10):
                        self._challenge(int(r["id"]), sub["data"], Verdict.model_validate(sub["data"]["verdict"]))
                if time.monotonic() - last_peers > 10:
                    self.refresh_ipfs_peers()
                    last_peers = time.monotonic()
                self.doing = f"following: backlog {self.state.count('submission', 'queued')}"
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("validator step failed")
            self.wait(self.cfg.validator.poll_interval)
        if hasattr(self, "_stream"):
            self._stream.stop()
        follower.join(timeout=5)

    def status(self) -> dict[str, Any]:
        """The runtime's status, the backlog, and the newest `server.status_items` verdicts and challenges
        (each list's total beside it): bounded whatever the history."""
        doc = super().status()
        n = self.cfg.server.status_items
        doc.update({
            "backlog": self.state.count("submission", "queued"),
            "verdicts": [{"submission_id": int(r["id"]), "status": r["status"],
                          "reason": (r["data"].get("verdict") or {}).get("reason") or r["data"].get("given_up"),
                          "node": r["data"].get("node")}
                         for r in self.state.latest("submission", n, not_status="queued")],
            "verdicts_total": self.state.count("submission") - self.state.count("submission", "queued"),
            "challenges": [{"challenge_id": int(r["id"]), "status": r["status"],
                            "evidence_cid": r["data"].get("evidence_cid"), "mine": bool(r["data"].get("mine"))}
                           for r in self.state.latest("challenge", n)],
            "challenges_total": self.state.count("challenge"),
        })
        return doc


