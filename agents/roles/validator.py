"""The validator agent: check the pool's submissions it is paid to check and those it must vote on, attest good
work, challenge bad work.

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

Which submissions (`validator.check`, issue 33): attesters are paid per assigned slot and a worker's slash goes to
the treasury, so by default (`assigned`) it checks those the chain assigned to it, those with a challenge round open
or ended without outcome (a `ChallengeOpened` queues an `unassigned` one again), those nobody holds a slot of, and
those whose assignment stays unreadable until their window nears its end (`check_scope`); `all` checks every one.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from intellect.agents.hardware import resolve
from intellect.agents.roles import check_scope
from intellect.agents.roles import evidence as worker_evidence
from intellect.agents.roles._inflight import InFlightChecks
from intellect.agents.roles._runtime import (
    Agent,
    StateCursorStore,
    attestations_reply,
    bare_hex,
    load_task_set,
)
from intellect.agents.roles.accountability import slash_losing_voters
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.attester_rewards import claim_attester_rewards, note_attester_event
from intellect.agents.roles.attesting import keep_attestation, post_attestations
from intellect.agents.roles.budget_class import BudgetClasses
from intellect.agents.roles.challenges import open_challenge, send_round_actions, void_wiped_submissions
from intellect.agents.roles.checkpoints import (
    CheckpointCache,
    checkpoint_dir,
    fetch_checkpoint,
    load_checkpoint,
)
from intellect.agents.roles.claim_lookup import claim_class, claim_seed, validator_assigner
from intellect.agents.roles.evidence_store import push_challenge_evidence
from intellect.agents.roles.pool_rules import apply_pool_rules, pool_evidence_rules
from intellect.sdk import EventStream, IntellectError, IpfsError
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

__all__ = ["Rejection", "Validator", "Verdict"]

log = logging.getLogger(__name__)

MAX_CHECK_CRASHES = 2  # a submission whose check ended the validator's process this often is given up


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
        self.checkpoints = CheckpointCache(cfg.validator.cached_checkpoints)
        self.task_set: Any = None  # loaded in start()
        self._assigner: Assigner | None = None  # made on the first assignment asked (`_claim_assigner`)
        self._inflight: dict[int, Future[Any]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._tx_lock = threading.Lock()  # one challenge at a time: its bond approval must not race
        self._published = -1  # newest checkpoint step seen in CheckpointPublished events
        self._checks = InFlightChecks(self.state)

    # -- set-up --------------------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        v = self.cfg.validator

        # the pool's rules before registering and staking: a contradicting configuration stops here
        self.refresh_ipfs_peers()
        self.rules = apply_pool_rules(self.cfg, self.pool.params.rules_cid, self.ipfs, self.pool_id)
        # the profile may have come from the rules just now; a pool calibrated on its model names its own
        self.evidence_rules = pool_evidence_rules(self.rules, self.ipfs, self.cfg.validator.toploc_profile)
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
            check_scope.requeue_challenged(self.state, cid)  # an `unassigned` one is checked now: it votes
        elif e.event == "ChallengeResolved":
            cid = int(a["challengeId"])
            if self.state.record("challenge", cid) is not None:
                outcome = {2: "upheld", 3: "rejected", 4: "no_quorum"}.get(int(a.get("outcome", 0)))
                self.state.put("challenge", cid, outcome or ("upheld" if a["upheld"] else "rejected"),
                               {"slashed": int(a["slashed"])})
        elif e.event in ("AttestationRecorded", "AttestationRootRecorded"):  # issue 21; issue 38's roots
            note_attester_event(self.state, e.event, a, me=self.protocol.address, pool_id=self.pool_id)

    def _follow(self) -> None:
        events = ["TaskClaimed", "WorkSubmitted", "ChallengeOpened", "ChallengeResolved", "CheckpointPublished"]
        if "AttesterBook" in self.protocol.contracts:  # optional contract (issue 21)
            events += ["AttestationRecorded", "AttestationRootRecorded"]
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
        return self.checkpoints.get(step, self._load_checkpoint)

    def _load_checkpoint(self, step: int) -> Checkpoint:
        cid = self.protocol.checkpoint(self.pool_id, step).manifest_cid
        root = self.data_dir / "checkpoints"
        if not (checkpoint_dir(root, step) / "config.json").is_file():
            assert self.directory is not None
            sources = self.shardcast_sources()
            self.refresh_ipfs_peers(extra=[self.directory.service(self.pool.params.trainer, "ipfs") or ""])
            root.mkdir(parents=True, exist_ok=True)
            fetch_checkpoint(cid, root, step, sources=sources, ipfs=self.ipfs, reputation=self.checkpoints.reputation)
        device, dtype = resolve(self.cfg.validator.device, self.cfg.validator.dtype, "validator")
        return load_checkpoint(checkpoint_dir(root, step), cid, device, dtype)

    def _preload_latest(self) -> None:
        """Fetch and load the newest published checkpoint in the background as soon as it is posted,
        so the first submission of a step does not wait for the model (Shardcast fetch + load)."""
        self.checkpoints.preload(self._published, self.checkpoint_model,
                                 on_error=lambda exc: self.metrics.inc("errors_total", kind=type(exc).__name__))

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
                      seed=lambda: claim_seed(self.protocol, self.state, sid),
                      budget_class=lambda: claim_class(self.protocol, self.state, self.classes, sid, sub["node"]))
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
        mode = self.cfg.validator.evidence
        if mode == "off":
            return
        ev = worker_evidence.record_verdict(self.state, self.evidence_rules, sid, sub, verdict.llr)
        if ev is None or not ev.flagged or mode != "enforce":
            return
        due = worker_evidence.due_challenge(self.state, self.evidence_rules, ev, self.protocol.chain_time)
        if due is not None:
            target, flag = due
            tsub = self.state.record("submission", target)
            assert tsub is not None
            self._challenge(target, tsub["data"], flag)
            self.state.put(worker_evidence.KIND, ev.worker.lower(), "challenged", {"challenged": target})

    def vote_of(self, challenge: dict[str, Any], sub: dict[str, Any]) -> bool | None:
        """How this validator votes on an open challenge (None: not now): `check_scope.vote_of`."""
        return check_scope.vote_of(self.state, self.evidence_rules, self.ipfs, challenge, sub)

    def _attest(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        keep_attestation(self.protocol, self.state, sid, sub, verdict)
        log.info("submission %d accepted (%.2fs)", sid, verdict.seconds)
        self._post_attestations()

    def _challenge(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        """Open a challenge of submission `sid` for `verdict` (`challenges.open_challenge`), one at a time."""
        with self._tx_lock:
            cid = open_challenge(self.protocol, self.state, self.ipfs, sid, sub, verdict)
        if cid is not None:
            self.count("challenged")
            log.warning("challenged submission %d of %s: %s (evidence %s)", sid, sub["node"], verdict.reason, cid)
            push_challenge_evidence(self, cid, sid)  # issue 36: voters reach it when this validator is behind NAT

    def _post_attestations(self) -> None:
        """Offer the signed attestations to the pool's trainer (`validator.trainer_url`, else its registered
        endpoint): `attesting.post_attestations`."""
        if not self.state.count("attestation", "signed"):
            return
        url = self.cfg.validator.trainer_url
        if not url and self.directory is not None:
            url = self.directory.node(self.pool.params.trainer).endpoint or None
        if url and (posted := post_attestations(self.state, url)):
            self.count("attestations_posted", posted)

    def _votes_and_resolutions(self) -> None:
        """Vote, resolve and challenge again as the open rounds ask (`challenges.send_round_actions`, issue 33)."""
        send_round_actions(self.protocol, self.state, lock=self._tx_lock, vote_of=self.vote_of,
                           rechallenge=self._challenge, count=self.count, metrics=self.metrics)

    def _settle(self) -> None:
        """Issue 21's follow-ups, each guarded (a failure logs and is tried again on the next pass): claim the
        attester rewards of this validator's recorded attestations whose windows closed
        (`attester_rewards.claim_attester_rewards`), slash the losing voters of resolved challenges this validator
        took part in (`accountability.slash_losing_voters`), and after a challenge of ours is upheld, void the
        slashed worker's other wiped submissions (`challenges.void_wiped_submissions`)."""
        try:
            claim_attester_rewards(self.protocol, self.state, lock=self._tx_lock, ipfs=self.ipfs, data_dir=self.data_dir)
        except Exception as exc:
            self.metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("claiming attester rewards failed (retried later): %s", exc)
        if self.cfg.validator.slash_losing_voters and "AttesterBook" in self.protocol.contracts:
            try:  # losing voters of challenges we took part in (issue 21)
                slash_losing_voters(self.protocol, self.state, lock=self._tx_lock)
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.warning("slashing losing voters failed (retried later): %s", exc)
        void_wiped_submissions(self.protocol, self.state, lock=self._tx_lock, metrics=self.metrics)

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
        queued = check_scope.select(self.state, queued, self.cfg.validator.check, self.protocol, self._claim_assigner,
                                    margin=max(60, self.pool.params.window_length // 10), now=now, busy=self._inflight)
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

    def _claim_assigner(self) -> Assigner:
        if self._assigner is None:
            rules = getattr(self, "rules", None)
            self._assigner = validator_assigner(self.protocol, self.pool.params.quorum,
                                                rules.assigned_validators if rules is not None else None)
        return self._assigner

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
                         for r in self.state.latest("submission", n, not_status=check_scope.UNJUDGED)],
            "verdicts_total": self.state.count("submission") - check_scope.unjudged(self.state),
            "challenges": [{"challenge_id": int(r["id"]), "status": r["status"],
                            "evidence_cid": r["data"].get("evidence_cid"), "mine": bool(r["data"].get("mine"))}
                           for r in self.state.latest("challenge", n)],
            "challenges_total": self.state.count("challenge"),
        })
        return doc


