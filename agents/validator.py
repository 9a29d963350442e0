"""The validator agent: check every submission of the pool, attest good work, challenge bad work.

Follows `WorkSubmitted`, `ChallengeOpened` and `ChallengeResolved` (resumable cursor in the
state store). Each submission goes through `verify_submission`, cheapest checks first:

    fetch (CID-verified, size-capped) → schema → worker / task / seed / policy step / proofs hash /
    work units → problems and target lengths == sample_problems(seed, budgets of the node's
    declared hardware) → prompts re-tokenised → checkpoint = the on-chain one → rewards and
    advantages recomputed → TOPLOC by one batched prefill (+ the sampling check)

Accepted → EIP-712 attestation, kept in the state store, POSTed to the pool trainer's
`/attestations` (retried; the trainer can also pull `GET /attestations?since=`). Rejected →
evidence JSON (reason code, failing statistics) on IPFS → `challenge(submission, evidenceCid)`.
Challenges opened by others are voted on from this validator's own verdict; challenges whose
vote period ended are resolved. Submissions are checked concurrently; `/metrics` has the backlog.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import requests
from pydantic import BaseModel, ConfigDict, Field

from intellect.agents._runtime import Agent, StateCursorStore, load_task_set, thinking_budgets
from intellect.agents._server import HttpError

__all__ = ["EVIDENCE_SCHEMA", "Evidence", "Rejection", "Validator", "Verdict"]

log = logging.getLogger(__name__)

EVIDENCE_SCHEMA = "intellect.evidence/v1"
REWARD_TOL = 1e-4


class Rejection(Exception):
    """A submission failed a check: `reason` is a stable code, `stats` the failing numbers."""

    def __init__(self, reason: str, detail: str, stats: dict[str, Any] | None = None) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.stats = stats or {}


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    submission_id: int
    accepted: bool
    reason: str | None = None
    detail: str = ""
    stats: dict[str, Any] = Field(default_factory=dict)
    seconds: float = 0.0


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


class _Unavailable(Exception):
    """The rollout file could not be fetched (yet)."""


class Validator(Agent):
    role = "validator"
    node_role = "validator"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        for name in ("verified", "accepted", "rejected", "challenged", "votes", "resolved", "attestations_posted"):
            self.counters[name] = int(self.state.get(f"counter:{name}", 0))
        self.metrics.declare("backlog", "gauge", "submissions waiting for or under verification")
        self.metrics.declare("verdicts_total", "counter", "verdicts by outcome and reason")
        self.metrics.declare("verify_seconds_total", "counter", "time spent verifying")
        self._models: OrderedDict[int, tuple[Any, Any]] = OrderedDict()
        self._model_lock = threading.Lock()
        self._shardcast_reputation: Any = None
        self._inflight: dict[int, Future[Any]] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._claims: dict[int, bytes] = {}
        self._tx_lock = threading.Lock()  # one challenge at a time: its bond approval must not race
        self._published = -1  # newest checkpoint step seen in CheckpointPublished events
        self._preloaded = -1
        self._preloader: threading.Thread | None = None

    # -- set-up --------------------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        v = self.cfg.validator
        self.ensure_node(stake_amount=v.stake_amount, auto_stake=v.auto_stake)
        self.refresh_ipfs_peers()
        self.task_set = load_task_set(self.cfg.tasks, self.pool.params.task_set_cid, self.ipfs)
        assert self.server is not None
        self.server.route("GET", "/attestations", self._get_attestations)
        self._executor = ThreadPoolExecutor(max_workers=v.concurrency, thread_name_prefix="verify")
        self._closers.append(lambda: self._executor.shutdown(wait=False, cancel_futures=True)
                             if self._executor else None)

    def _get_attestations(self, query: dict[str, list[str]], _body: Any) -> Any:
        try:
            since = float(query.get("since", ["0"])[0])
        except ValueError:
            raise HttpError(400, "since must be a number (seconds since the epoch)") from None
        return [r["data"]["attestation"] | {"_updated_at": r["updated_at"]}
                for r in self.state.records("attestation") if r["updated_at"] > since]

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
        elif e.event == "CheckpointPublished":
            if int(a["poolId"]) == self.pool_id:
                self._published = max(self._published, int(a["step"]))
        elif e.event == "ChallengeOpened":
            cid = int(a["challengeId"])
            if self.state.record("submission", cid) is None:
                return  # another pool's submission
            old = self.state.record("challenge", cid)
            if old is None or old["status"] == "opening":
                mine = a["challenger"].lower() == self.protocol.address.lower()
                self.state.put("challenge", cid, "open", {"challenger": a["challenger"], "vote_end": int(a["voteEnd"]),
                                                          "evidence_cid": a["evidenceCid"], "node": a["node"],
                                                          "mine": mine})
        elif e.event == "ChallengeResolved":
            cid = int(a["challengeId"])
            if self.state.record("challenge", cid) is not None:
                self.state.put("challenge", cid, "upheld" if a["upheld"] else "rejected",
                               {"slashed": int(a["slashed"])})

    def _follow(self) -> None:
        from intellect.sdk import EventStream

        stream = EventStream(self.protocol, ["WorkSubmitted", "ChallengeOpened", "ChallengeResolved",
                                             "CheckpointPublished"],
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
    def checkpoint_model(self, step: int) -> tuple[Any, Any]:
        """(model, tokenizer) of the pool's on-chain checkpoint `step` (fetched via Shardcast, cached)."""
        with self._model_lock:
            if step in self._models:
                self._models.move_to_end(step)
                return self._models[step]
            from transformers import AutoModelForCausalLM, AutoTokenizer

            from intellect.sdk.shardcast import Client, SourceReputation

            cid = self.protocol.checkpoint(self.pool_id, step).manifest_cid
            out = self.data_dir / "checkpoints" / f"step-{step}"
            if not (out / "config.json").is_file():
                assert self.directory is not None
                trainer = self.pool.params.trainer
                sources = [s for s in [self.directory.service(trainer, "shardcast")] if s]
                sources += self.directory.services("shardcast", roles=("relay",))
                self.refresh_ipfs_peers(extra=[self.directory.service(trainer, "ipfs") or ""])
                out.parent.mkdir(parents=True, exist_ok=True)
                if self._shardcast_reputation is None:  # corrupt-shard benches outlive one fetch
                    self._shardcast_reputation = SourceReputation()
                Client(relays=sources, ipfs=self.ipfs, fsync=False, reputation=self._shardcast_reputation).fetch(cid, out)
            model = AutoModelForCausalLM.from_pretrained(str(out)).eval()
            tok = AutoTokenizer.from_pretrained(str(out))
            self._models[step] = (model, tok, cid)  # type: ignore[assignment]
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
        if task_id not in self._claims:
            evs = self.protocol.get_events(["TaskClaimed"], filters={"taskId": task_id})
            if not evs:
                raise Rejection("unknown_task", f"no TaskClaimed event for task {task_id}")
            seed = evs[-1].args["seed"]
            self._claims[task_id] = bytes.fromhex(seed) if isinstance(seed, str) else bytes(seed)
        return self._claims[task_id]

    # -- verification --------------------------------------------------------------------------
    def fetch_rollouts(self, sid: int, sub: dict[str, Any]) -> bytes:
        from intellect.sdk import IpfsError

        assert self.directory is not None
        try:
            self.refresh_ipfs_peers(extra=[self.directory.service(sub["node"], "ipfs") or ""])
            return self.ipfs.cat(sub["rollouts_cid"], max_size=self.cfg.ipfs.max_fetch_bytes)
        except IpfsError as exc:
            if type(exc).__name__ in ("ContentTooLargeError", "CidMismatchError", "InvalidCidError"):
                raise Rejection("bad_cid", str(exc)) from None
            raise _Unavailable(str(exc)) from None

    def verify_submission(self, sid: int, sub: dict[str, Any]) -> Verdict:
        """Run every check; a failure raises `Rejection` (caught into a rejecting verdict)."""
        t0 = time.perf_counter()
        try:
            stats = self._verify(sid, sub)
            return Verdict(submission_id=sid, accepted=True, stats=stats, seconds=time.perf_counter() - t0)
        except Rejection as rej:
            return Verdict(submission_id=sid, accepted=False, reason=rej.reason, detail=rej.detail, stats=rej.stats,
                           seconds=time.perf_counter() - t0)

    def _verify(self, sid: int, sub: dict[str, Any]) -> dict[str, Any]:
        from intellect.agents.learn import prompt_text
        from intellect.agents.rollouts import RolloutFile, RolloutFileError
        from intellect.agents.worker import score_group
        from intellect.verifier.prefill import verify_samples
        from intellect.verifier.tasks import sample_problems
        from intellect.verifier.toploc import proofs_hash

        data = self.fetch_rollouts(sid, sub)
        try:
            rf = RolloutFile.from_bytes(data, name=sub["rollouts_cid"])
        except RolloutFileError as exc:
            raise Rejection("bad_file", str(exc)) from None
        meta = rf.meta
        if meta.worker.lower() != sub["node"].lower():
            raise Rejection("wrong_worker", f"file names worker {meta.worker}, submitted by {sub['node']}")
        if meta.task_id != str(sid):
            raise Rejection("wrong_task", f"file answers task {meta.task_id}, submitted for {sid}")
        if meta.policy_step != sub["policy_step"]:
            raise Rejection("wrong_policy_step", f"file policy step {meta.policy_step}, on-chain {sub['policy_step']}")
        ph = "0x" + proofs_hash([p for r in rf.rows for p in r.proofs]).hex()
        if ph != sub["proofs_hash"].lower():
            raise Rejection("proofs_hash_mismatch", f"proofs hash {ph} != on-chain {sub['proofs_hash']}")
        units = sum(len(r.completion_ids) for r in rf.rows)
        if units != sub["work_units"]:
            raise Rejection("work_units_mismatch", f"{units} tokens generated, {sub['work_units']} units claimed",
                            {"tokens": units, "claimed": sub["work_units"]})
        seed = self.claim_seed(sid)
        if meta.seed.lower().removeprefix("0x") != seed.hex():
            raise Rejection("wrong_seed", f"file seed {meta.seed} != claim seed {seed.hex()}")
        node = self.directory.node(sub["node"]) if self.directory else self.protocol.node(sub["node"])
        budgets = thinking_budgets(self.cfg.tasks, node.gpu_model, node.vram_gib, node.gpu_count)
        w = self.cfg.worker
        assigned = sample_problems(self.task_set, seed, w.problems_per_task, budgets)
        if meta.group_size != w.group_size:
            raise Rejection("wrong_group_size", f"group size {meta.group_size}, the pool's is {w.group_size}")
        if abs(meta.length_alpha - self.cfg.tasks.length_alpha) > 1e-12:
            raise Rejection("wrong_length_alpha", f"length alpha {meta.length_alpha} != {self.cfg.tasks.length_alpha}")
        groups: list[tuple[str, list[Any]]] = []
        for r in rf.rows:
            if not groups or groups[-1][0] != r.problem_id:
                groups.append((r.problem_id, []))
            groups[-1][1].append(r)
        got = [(g[0], g[1][0].target_length) for g in groups]
        want = [(a.task_id, a.target_len) for a in assigned]
        if got != want:
            raise Rejection("wrong_problems", f"problems/target lengths {got} != assigned {want}",
                            {"got": got, "assigned": want})
        model, tok, cid = self.checkpoint_model(meta.policy_step)  # type: ignore[misc]
        if meta.model != cid:
            raise Rejection("wrong_checkpoint", f"file names checkpoint {meta.model}, step {meta.policy_step} is {cid}")
        worst = 0.0
        for (pid, rows), a in zip(groups, assigned, strict=True):
            task = self.task_set[pid]
            prompt_ids = list(tok(prompt_text(task, a.target_len), add_special_tokens=False)["input_ids"])
            for i, r in enumerate(rows):
                if r.target_length != a.target_len:
                    raise Rejection("wrong_problems", f"row {i} of {pid}: target {r.target_length} != {a.target_len}")
                if list(r.prompt_ids) != prompt_ids:
                    raise Rejection("wrong_prompt", f"problem {pid} row {i}: prompt tokens differ from the task's")
                if len(r.completion_ids) > a.target_len:
                    raise Rejection("over_budget", f"problem {pid} row {i}: {len(r.completion_ids)} tokens > "
                                    f"budget {a.target_len}")
            texts = [tok.decode(r.completion_ids, skip_special_tokens=True) for r in rows]
            scored = score_group(task, texts, [len(r.completion_ids) for r in rows], a.target_len,
                                 self.cfg.tasks.length_alpha)
            for i, (r, (tr, lp, total, adv)) in enumerate(zip(rows, scored, strict=True)):
                diffs = {"task_reward": abs(r.task_reward - tr), "length_penalty": abs(r.length_penalty - lp),
                         "reward": abs(r.reward - total), "advantage": abs(r.advantage - adv)}
                bad = {k: v for k, v in diffs.items() if v > REWARD_TOL}
                if bad:
                    raise Rejection("reward_mismatch", f"problem {pid} row {i}: {sorted(bad)} differ from recomputed",
                                    {"row": i, "problem": pid, "claimed": {"task_reward": r.task_reward,
                                     "reward": r.reward, "advantage": r.advantage},
                                     "recomputed": {"task_reward": tr, "reward": total, "advantage": adv}})
                worst = max(worst, *diffs.values())
        from intellect.verifier.replay import problem_seed, sample_seed
        from intellect.verifier.toploc import DEFAULT_THRESHOLDS, Thresholds, check_aggregate

        # the sampler's seed of row i of problem k, as the worker derived it (replayed by verify_samples)
        samples = [(list(r.prompt_ids), list(r.completion_ids), list(r.proofs), sample_seed(problem_seed(seed, k), i))
                   for k, (_, rows) in enumerate(groups) for i, r in enumerate(rows)]

        thresholds = Thresholds.fp32() if self.cfg.validator.toploc_profile == "fp32" else DEFAULT_THRESHOLDS
        results = verify_samples(model, samples, thresholds, temperature=self.cfg.tasks.temperature)
        for i, res in enumerate(results):
            if not res.ok:
                chunk = res.chunks[res.failed_chunk] if res.chunks and res.failed_chunk is not None else None
                raise Rejection(f"toploc_{res.reason}", f"row {i}: {res.detail}",
                                {"row": i, "failed_chunk": res.failed_chunk,
                                 "chunk": chunk.model_dump() if chunk is not None else None,
                                 "failed_rows": sum(1 for r in results if not r.ok), "rows": len(results)})
        agg = check_aggregate(results, thresholds)  # small deviations everywhere (a slightly different model)
        if not agg.ok:
            raise Rejection(f"toploc_{agg.reason}", agg.detail, {"rows": len(results)})
        return {"rows": len(rf.rows), "tokens": units, "max_reward_diff": worst,
                "mean_reward": sum(r.reward for r in rf.rows) / len(rf.rows)}

    # -- acting on verdicts --------------------------------------------------------------------
    def _process(self, sid: int) -> None:
        rec = self.state.record("submission", sid)
        if rec is None or rec["status"] != "queued":
            return
        sub = rec["data"]
        try:
            verdict = self.verify_submission(sid, sub)
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
        self.count("verified")
        self.metrics.inc("verdicts_total", outcome="accepted" if verdict.accepted else "rejected",
                         reason=verdict.reason or "ok")
        self.metrics.inc("verify_seconds_total", verdict.seconds)
        if verdict.accepted:
            self.count("accepted")
            self._attest(sid, sub, verdict)
        else:
            self.count("rejected")
            log.warning("submission %d rejected: %s (%s)", sid, verdict.reason, verdict.detail)
            self.state.put("submission", sid, "rejected", {"verdict": verdict.model_dump()})
            self._challenge(sid, sub, verdict)

    def _attest(self, sid: int, sub: dict[str, Any], verdict: Verdict) -> None:
        from intellect.agents.attestation import sign_attestation

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
        from intellect.sdk import ContractRevert, TaskStatus

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
        cid = (rec or {}).get("data", {}).get("evidence_cid")
        if not cid:
            ev = Evidence(submission_id=sid, rollouts_cid=sub["rollouts_cid"], node=sub["node"],
                          reason=verdict.reason or "rejected", detail=verdict.detail[:2000], stats=verdict.stats,
                          validator=self.protocol.address, checked_at=time.time())
            cid = self.ipfs.add(ev.model_dump_json(by_alias=True).encode())
        self.state.put("challenge", sid, "opening", {"evidence_cid": cid, "reason": verdict.reason})
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
        self.state.put("challenge", sid, status, {"challenger": info.challenger, "vote_end": info.vote_end,
                                                  "node": node, "mine": mine})

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
        for r in pending:
            try:
                resp = requests.post(url.rstrip("/") + "/attestations", json=r["data"]["attestation"], timeout=5)
            except requests.RequestException as exc:
                log.debug("posting attestation %s: %s", r["id"], exc)
                return
            if resp.ok:
                self.state.put("attestation", r["id"], "posted")
                self.count("attestations_posted")
            else:
                log.warning("trainer refused attestation %s: %s", r["id"], resp.text.strip()[:300])
                self.state.put("attestation", r["id"], "refused", {"error": resp.text[:300]})

    def _votes_and_resolutions(self) -> None:
        from intellect.sdk import ContractRevert

        now = None
        for r in self.state.records("challenge", "open"):
            cid = int(r["id"])
            d = r["data"]
            sub = self.state.record("submission", cid)
            if (d.get("challenger", "").lower() != self.protocol.address.lower() and not d.get("voted")
                    and sub is not None and sub["status"] in ("accepted", "rejected")):
                now = now or self.protocol.chain_time()
                if now < d["vote_end"] and not self.protocol.has_voted(cid, self.protocol.address):
                    uphold = sub["status"] == "rejected"
                    try:
                        with self._tx_lock:
                            self.protocol.vote(cid, uphold)
                        self.count("votes")
                        log.info("voted %s on challenge %d", "uphold" if uphold else "reject", cid)
                    except ContractRevert as exc:
                        log.warning("vote on %d refused: %s", cid, exc)
                self.state.put("challenge", cid, "open", {"voted": True})
            now = now or self.protocol.chain_time()
            info = self.protocol.challenge_info(cid)
            validators = self.protocol.active_count("validator")
            decided = ((2 * info.votes_for > validators and info.votes_for + info.votes_against >= self.pool.params.quorum)
                       or 2 * info.votes_against > validators)  # the contract allows resolving early then
            if now > d["vote_end"] or decided:
                try:
                    with self._tx_lock:
                        upheld = self.protocol.resolve(cid)
                    self.count("resolved")
                    log.info("resolved challenge %d: %s", cid, "upheld" if upheld else "rejected")
                except ContractRevert as exc:
                    if exc.name != "TaskLedgerChallengeNotOpen":
                        log.warning("resolve %d refused: %s", cid, exc)
                info = self.protocol.challenge_info(cid)
                if info.status.name.lower() in ("upheld", "rejected"):
                    self.state.put("challenge", cid, info.status.name.lower())

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
        for r in self.state.records("submission", "queued"):
            sid = int(r["id"])
            if sid in self._inflight or r["data"].get("retry_at", 0) > now:
                continue
            if len(self._inflight) >= self.cfg.validator.concurrency * 2:
                break
            self._inflight[sid] = self._executor.submit(self._process, sid)
        self.metrics.set("backlog", self.state.count("submission", "queued"))

    def loop(self) -> None:
        follower = threading.Thread(target=self._follow, name="events", daemon=True)
        follower.start()
        last_peers = 0.0
        while not self.stop_event.is_set():
            try:
                self._preload_latest()
                self._dispatch()
                self._post_attestations()
                self._votes_and_resolutions()
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
        doc = super().status()
        doc.update({
            "backlog": self.state.count("submission", "queued"),
            "verdicts": [{"submission_id": int(r["id"]), "status": r["status"],
                          "reason": (r["data"].get("verdict") or {}).get("reason"),
                          "node": r["data"].get("node")}
                         for r in self.state.records("submission") if r["status"] != "queued"],
            "challenges": [{"challenge_id": int(r["id"]), "status": r["status"],
                            "evidence_cid": r["data"].get("evidence_cid"), "mine": bool(r["data"].get("mine"))}
                           for r in self.state.records("challenge")],
        })
        return doc


