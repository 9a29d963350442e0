"""The trainer agent: owns the pool's policy, trains GRPO steps on attested rollouts only.

    start: register (trainer role) → load/resume the policy → publish step 0 (or the step the
           chain lacks) through Shardcast (origin + manifest on IPFS) and `publishCheckpoint`
    loop:  follow WorkSubmitted → take validator attestations (POST /attestations, and pulled
           from validators' GET /attestations) → a batch of submissions trusted by the rule
           `intellect.verifier.assignment.trainable` (every stake-weighted slot the chain assigned
           it attested, or ≥ quorum slots and `trainer.attestation_wait` passed: slots are drawn from
           the claim's seed and the validators' stakes before the claim's block, not chosen by the
           worker), fresh (policy ≥ t − async_level) and not challenged (re-checked on-chain right
           before training) → GRPO step → publish t+1

Crash safety: the chosen batch is recorded (`plan`) before training; the checkpoint dir is
written atomically; on restart the trainer resumes from its newest local checkpoint, publishes
it if the chain lacks it, and marks the plan's submissions consumed only once the checkpoint is
on-chain. A submission is consumed at most once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from intellect.agents.attestation import Attestation, AttestationError
from intellect.agents.engines import TransformersEngine
from intellect.agents.evaluation import evaluate_checkpoint, held_out_max_tokens
from intellect.agents.grpo import UntrustedValueError, recompute_advantages
from intellect.agents.grpo_trainer import (
    GRPOTrainer,
    NonFiniteWeightsError,
    NoSignalError,
    Sample,
    latest_checkpoint,
    signal_groups,
)
from intellect.agents.hardware import resolve
from intellect.agents.models import smollm2_dir, tiny_model_dir
from intellect.agents.roles._runtime import (
    MAX_ATTESTATIONS_PAGE,
    Agent,
    AgentError,
    StateCursorStore,
    bare_hex,
    load_task_set,
)
from intellect.agents.roles._server import HttpError
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.canary import CanaryInjector, canary_ids
from intellect.agents.roles.eval_thread import BackgroundEvaluator
from intellect.agents.roles.signal import NO_SIGNAL_AFTER_S, no_signal_report
from intellect.agents.roles.store import accept_pushed_file, sweep_stored
from intellect.agents.warmstart import WarmStartRecipe, warm_start_cached
from intellect.sdk import ContractRevert, EventStream, IntellectError, IpfsError, PoolState, TaskStatus
from intellect.sdk.http import PeerHttpError, fetch
from intellect.sdk.shardcast import SERVER_LIMITS as LIMITS
from intellect.sdk.shardcast import Origin
from intellect.verifier.assignment import DEV_CHAIN_IDS, assignment_size, effective_quorum, trainable
from intellect.verifier.isolation import ParseUnavailable
from intellect.verifier.rewards import JudgeBudget, LengthScope
from intellect.verifier.rollouts import RolloutFile, RolloutFileError
from intellect.verifier.submission import group_rows, score_group, too_stale
from intellect.verifier.tasks import TaskSet

__all__ = ["DEV_CHAIN_IDS", "Trainer", "effective_quorum", "ready_submissions", "same_operator", "trusted_submissions",
           "verified_samples", "warm_start_recipe"]

log = logging.getLogger(__name__)


def warm_start_recipe(tasks: Any) -> Any:
    """The `WarmStartRecipe` for a pool's `TaskSettings`: its synthetic task set (`synthetic:N:SEED`,
    the only source the warm start knows) and every thinking budget a worker may be given, so the
    warm-started policy has seen the exact prompts the pool's workers send."""
    parts = str(tasks.source).split(":")
    if len(parts) != 3 or parts[0] != "synthetic" or not parts[1].isdigit() or not parts[2].isdigit():
        raise AgentError(f"trainer.model tiny-warm needs tasks.source synthetic:N:SEED, got {tasks.source!r}")
    budgets = tuple(sorted({int(b) for v in tasks.budgets.values() for b in v}))
    return WarmStartRecipe(tasks=int(parts[1]), task_seed=int(parts[2]), target_lengths=budgets)


def ready_submissions(trusted: Collection[int], submissions: dict[int, dict[str, Any]], *,
                      train_step: int, async_level: int) -> tuple[list[int], list[int]]:
    """(ready, stale) submission ids: ready = pending, in `trusted` (`trusted_submissions`) and fresh enough
    for training step `train_step`; stale = trusted but too old to ever be used. Pure; ids ascending."""
    ready, stale = [], []
    for sid in sorted(submissions):
        sub = submissions[sid]
        if sub.get("status") != "pending" or sid not in trusted:
            continue
        if too_stale(train_step, sub["policy_step"], async_level):
            stale.append(sid)
        else:
            ready.append(sid)
    return ready, stale


def trusted_submissions(records: list[dict[str, Any]], submissions: dict[int, dict[str, Any]], slots: Any, *,
                        quorum: int, now: float, wait_s: float) -> set[int]:
    """The pending submissions the trainer's rule trusts (`intellect.verifier.assignment.trainable`), from its
    attestation records (`data`: submission_id, validator) and submission records (`seen_at`: when the trainer
    first saw it; a record without one counts as seen at `now`). `slots(submission_id)`: the slots the chain
    assigned it (empty while unknown). Keys, owners and unassigned validators weigh nothing: only the assigned
    stake-weighted slots do. Pure but for `slots`."""
    attesters: dict[int, set[str]] = {}
    for r in records:
        d = r["data"]
        attesters.setdefault(int(d["submission_id"]), set()).add(str(d["validator"]).lower())
    out = set()
    for sid, sub in submissions.items():
        if sub.get("status") != "pending" or sid not in attesters:
            continue
        waited = now - float(sub.get("seen_at", now))
        if trainable(slots(sid), attesters[sid], quorum=quorum, waited_s=waited, wait_s=wait_s):
            out.add(sid)
    return out


def same_operator(validator: str, validator_owner: str, worker: str, worker_owner: str) -> bool:
    """True when an attestation by `validator` on `worker`'s work is the worker vouching for itself: the
    same node key, the same owner, or one node's key owning the other."""
    v, vo, w, wo = (a.lower() for a in (validator, validator_owner, worker, worker_owner))
    return v == w or vo in (wo, w) or wo == v


def verified_samples(rf: Any, task_set: Any, tokenizer: Any, alpha: float,
                     length_scope: LengthScope = "solved") -> tuple[list[Any], dict[str, float]]:
    """The trainer's samples of one rollout file, believing no number its worker wrote.

    Rewards are recomputed from the completions' text with the pool's verifiers and length rule, and
    advantages from those rewards (`grpo.recompute_advantages`, clamped); the file's own reward and
    advantage columns are read only to count how far they were off. Returns (samples, stats) with
    stats `max_reward_diff` and `max_advantage_diff`. Raises `UntrustedValueError` on a reward out of
    range and KeyError for a problem outside the task set.
    """
    samples: list[Any] = []
    stats = {"max_reward_diff": 0.0, "max_advantage_diff": 0.0}
    judge = JudgeBudget()  # the math judge's allowance for the file, as the worker and validators spent it
    for problem_id, rows in group_rows(rf.rows):
        task = task_set[problem_id]
        texts = [tokenizer.decode(r.completion_ids, skip_special_tokens=True) for r in rows]
        # the protocol's scoring rule; one target length per group (validators check every row's against the seed)
        scored = score_group(task, texts, [len(r.completion_ids) for r in rows], rows[0].target_length, alpha,
                             judge=judge, length_scope=length_scope)
        rewards = [total for _, _, total, _ in scored]
        advantages = recompute_advantages(rewards)
        for r, rw, adv in zip(rows, rewards, advantages, strict=True):
            stats["max_reward_diff"] = max(stats["max_reward_diff"], abs(r.reward - rw))
            stats["max_advantage_diff"] = max(stats["max_advantage_diff"], abs(r.advantage - adv))
            samples.append(Sample(r.problem_id, r.prompt_ids, r.completion_ids, adv, r.policy_step, rw,
                                  source=rf.meta.task_id))
    return samples, stats


class Trainer(Agent):
    role = "trainer"
    node_role = "trainer"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self._load_counters("attestations_received", "attestations_refused", "steps_trained", "submissions_consumed")
        self.metrics.declare("policy_step", "gauge", "latest published policy step")
        self.metrics.declare("ready_submissions", "gauge", "attested, fresh submissions waiting for a step")
        self.metrics.declare("train_loss", "gauge", "loss of the last step")
        self.metrics.declare("train_reward_mean", "gauge", "mean reward of the last step's rollouts")
        self.metrics.declare("eval_pass_at_1", "gauge", "held-out pass@1 (temperature 0) of the last evaluation")
        self.metrics.declare("eval_mean_reward", "gauge", "held-out mean reward of the last evaluation")
        self.metrics.declare("eval_step", "gauge", "policy step of the last evaluation")
        self._eval_engine: Any = None
        self.evaluator: Any = None
        """the held-out evaluation thread (`eval_thread.BackgroundEvaluator`), made at the first evaluation"""
        self.eval_tasks: list[Any] = []
        self._refill_since: tuple[int, float] | None = None
        """(step, monotonic time) the step's batch last grew: `trainer.refill_wait` counts from it"""
        self._verified: dict[int, list[Any]] = {}
        """verified samples of the submissions in the current plan (recomputing rewards runs verifiers)"""
        self.rules: Any = None
        """the pool's `PoolRules` (None for a pool whose CID names a bare task set)"""
        self._validator_ok: dict[str, tuple[float, bool]] = {}
        self._owners: dict[str, str] = {}
        self.quorum = max(1, self.cfg.trainer.attestation_quorum or 1)
        self.assigner: Any = None
        """the chain's assignment of validators to submissions (`roles.assignment.Assigner`), made in start()"""
        self._assignments: dict[int, tuple[str, ...]] = {}
        self._intake_lock = threading.Lock()
        self.gt: Any = None
        self.origin: Any = None
        self.no_signal: Any = None
        """the last `signal.NoSignalReport` of the step being filled (None once a group with signal came)"""
        self.no_signal_after = NO_SIGNAL_AFTER_S
        self._no_signal_logged = 0.0
        self._last_beat = 0.0
        self._beats = 0
        self.canary: CanaryInjector | None = None
        """the canary submissions' thread (`trainer.canary`, issue 21), made in start() when on"""

    # -- set-up --------------------------------------------------------------------------------
    def base_model(self) -> Path:
        m = self.cfg.trainer.model
        if m == "tiny":
            return tiny_model_dir()
        if m == "tiny-warm":
            return warm_start_cached(warm_start_recipe(self.cfg.tasks))
        if m == "smollm2":
            return smollm2_dir()
        p = Path(m)
        if not (p / "config.json").is_file():
            raise AgentError(f"trainer.model {m!r}: not 'tiny', 'tiny-warm', 'smollm2' or an HF model directory")
        return p

    def start(self) -> None:
        super().start()

        if self.protocol.address.lower() != self.pool.params.trainer.lower():
            raise AgentError(f"this key {self.protocol.address} is not pool {self.pool_id}'s trainer "
                             f"({self.pool.params.trainer}): use the pool's trainer key")
        self.origin = Origin(self.data_dir / "shardcast", ipfs=self.ipfs, host=self.cfg.server.host,
                             port=self.cfg.server.shardcast_port,
                             keep=max(self.cfg.trainer.grpo.keep_checkpoints, self.pool.params.async_level + 2),
                             shard_size=self.cfg.trainer.shard_size, limits=self.cfg.server.limits(LIMITS)).start()
        self.origin_url = self.cfg.server.advertised("shardcast", self.origin.url)  # what peers are given
        self.origin.relay_hints = [self.origin_url]
        self._closers.append(self.origin.stop)
        assert self.server is not None
        self.server.route("POST", "/attestations", self._post_attestation)
        self.server.route("POST", "/store", lambda _q, body: accept_pushed_file(self, body))  # workers' files
        self.ensure_node(stake_amount=0.0001, auto_stake=True)
        self.refresh_ipfs_peers()
        self._load_rules_and_tasks()
        self.quorum = effective_quorum(self.cfg.trainer.attestation_quorum, self.pool.params.quorum,
                                       self.protocol.chain_id)

        k = assignment_size(self.quorum, self.rules.assigned_validators if self.rules is not None else None)
        self.assigner = Assigner(self.protocol, k=k, quorum=self.quorum)
        log.info("attestation quorum: %d distinct validators of other operators per submission, of the %d the "
                 "chain assigns it", self.quorum, k)
        self._init_policy()
        self.canary = CanaryInjector.start_for(self)  # None unless trainer.canary is on
        self.eval_tasks = self._load_eval_tasks()
        if self.eval_tasks and self.state.record("eval", self.gt.step) is None:
            self.maybe_evaluate(self.gt.step, force=True)  # the baseline the later evaluations compare with

    def _load_rules_and_tasks(self) -> None:
        """The pool's rules and task sets, pinned in this trainer's store and served by its gateway so
        every node can resolve the CIDs the chain names."""
        from intellect.agents.roles.pool_rules import (
            apply_pool_rules,  # deferred: web3, for unit tests of the trainer
        )

        pool_cid = self.pool.params.rules_cid
        self.rules = apply_pool_rules(self.cfg, pool_cid, self.ipfs, self.pool_id)
        self.task_set = load_task_set(self.cfg.tasks, self.rules.taskset_cid if self.rules else pool_cid, self.ipfs)
        if self.rules is None:
            return
        for cid in (pool_cid, self.rules.taskset_cid, self.rules.heldout_cid):
            if cid:
                self.ipfs.pin(cid)  # fetches what is missing (every block hash-checked), keeps it from GC
        if self.rules.heldout_cid:
            data = self.ipfs.cat(self.rules.heldout_cid, max_size=256 << 20)
            self.held_out_source = TaskSet.from_bytes(data, name=self.rules.heldout_cid)
        log.info("serving pool rules %s, task set %s (%d tasks)%s", pool_cid, self.rules.taskset_cid,
                 len(self.task_set), f", held-out {self.rules.heldout_cid}" if self.rules.heldout_cid else "")

    def services(self) -> dict[str, str]:
        out = super().services()
        if self.origin is not None:
            out["shardcast"] = self.origin_url
        return out

    def _init_policy(self) -> None:
        t = self.cfg.trainer
        ckpt_dir = self.data_dir / "checkpoints"
        max_tokens = max(max(v) for v in self.cfg.tasks.budgets.values())
        device, dtype = resolve(t.device, t.dtype, "trainer")
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            raise AgentError("the trainer agent runs as one process (one GPU): it talks to the chain and serves "
                             "checkpoints; shard a large model over several GPUs with the offline trainer, "
                             "`torchrun --nproc-per-node N -m intellect.agents.grpo_trainer` (docs/agents.md)")
        log.info("training on %s (%s compute, fp32 master weights)", device, dtype)
        async_level = self.pool.params.async_level  # the recipe from the config; what the agent decides, here
        config = t.grpo.model_copy(update={
            "device": device, "autocast": None if dtype == "float32" else dtype, "max_completion_tokens": max_tokens,
            "async_level": async_level, "keep_checkpoints": max(t.grpo.keep_checkpoints, async_level + 2)})
        local = latest_checkpoint(ckpt_dir)
        self.gt = GRPOTrainer(local or self.base_model(), ckpt_dir, config)
        if local is None:
            self.gt.save_checkpoint()
            log.info("step 0 checkpoint written from %s", self.gt.model_dir)
        else:
            log.info("resuming from local checkpoint %s (step %d)", local, self.gt.step)
        chain = self.protocol.latest_step(self.pool_id)
        if chain is not None and chain > self.gt.step:
            raise AgentError(f"the chain has step {chain} but the newest local checkpoint is step {self.gt.step}: "
                             f"the trainer's data dir {self.data_dir} is missing checkpoints")
        if chain is None or chain < self.gt.step:
            self._publish(self.gt.step)
        else:
            self._finish_plan(self.gt.step, self.protocol.checkpoint(self.pool_id, chain).manifest_cid)
        self.metrics.set("policy_step", self.gt.step)

    def _publish(self, step: int) -> str:
        manifest, cid = self.origin.publish(self.gt.checkpoint_path(step), step, self.cfg.trainer.model)
        assert cid is not None
        self.state.put("step", step, "publishing", {"checkpoint_cid": cid, "manifest_id": manifest.id})
        self.protocol.publish_checkpoint(self.pool_id, step, cid)
        if self._beats:
            self._last_beat = time.monotonic()  # once heartbeats started, a checkpoint is one too (issue 37)
        log.info("published step %d: %s", step, cid)
        self._finish_plan(step, cid)
        self.metrics.set("policy_step", step)
        return cid

    def _finish_plan(self, step: int, cid: str) -> None:
        self._verified.clear()
        plan = self.state.get("plan")
        with self.state.transaction():
            rec = self.state.record("step", step)
            data = {"checkpoint_cid": cid, "published_at": time.time()}
            if plan is not None and plan["step"] == step:
                for sid in plan["submissions"]:
                    self.state.put("submission", sid, "consumed", {"step": step})
                data.update({k: plan[k] for k in ("submissions", "rollouts", "stats") if k in plan})
                self.state.set("plan", None)
                self.count("submissions_consumed", len(plan["submissions"]))
            if rec is None or rec["status"] != "published":
                self.state.put("step", step, "published", data)

    # -- attestations --------------------------------------------------------------------------
    def _is_validator(self, address: str) -> bool:
        cached = self._validator_ok.get(address.lower())
        if cached is not None and time.monotonic() - cached[0] < 15:
            return cached[1]
        ok = self.protocol.is_active(address, "validator") and self.protocol.has_min_stake(address, "validator")
        self._validator_ok[address.lower()] = (time.monotonic(), ok)
        return ok

    def _owner(self, address: str) -> str:
        """The registered owner of a node (cached: a node's owner never changes)."""
        key = address.lower()
        if key not in self._owners:
            self._owners[key] = self.protocol.node(address).owner
        return self._owners[key]

    def _submission(self, sid: int) -> dict[str, Any] | None:
        rec = self.state.record("submission", sid)
        if rec is not None:
            return rec["data"] | {"status": rec["status"]}
        # the WorkSubmitted follower recorded every event up to its cursor: only the blocks after it can
        # hold a submission it has not recorded yet (an attestation may come before the follower does)
        cursor = StateCursorStore(self.state, "trainer").load()
        evs = self.protocol.get_events(["WorkSubmitted"], from_block=None if cursor is None else cursor.block,
                                       filters={"submissionId": sid, "poolId": self.pool_id})
        if not evs:
            return None
        self._record_submission(evs[-1])
        rec = self.state.record("submission", sid)
        return None if rec is None else rec["data"] | {"status": rec["status"]}

    def _record_submission(self, e: Any) -> None:
        a = e.args
        sid = int(a["submissionId"])
        if int(a["poolId"]) != self.pool_id or self.state.record("submission", sid) is not None:
            return
        ph = a["proofsHash"] if isinstance(a["proofsHash"], str) else bytes(a["proofsHash"]).hex()
        self.state.put("submission", sid, "pending", {
            "node": a["node"], "rollouts_cid": a["rolloutsCid"], "proofs_hash": "0x" + ph.removeprefix("0x"),
            "policy_step": int(a["policyStep"]), "work_units": int(a["workUnits"]),
            "seen_at": time.time()})  # `trainer.attestation_wait` counts from here

    def accept_attestation(self, body: Any) -> dict[str, Any]:
        """Check one attestation (schema, signature, domain, signer's role and stake, match with the
        on-chain submission) and keep it. Raises HttpError with the reason otherwise."""
        from pydantic import ValidationError

        try:
            att = Attestation.model_validate(body)
            att.verify()
        except (ValidationError, AttestationError) as exc:
            self.count("attestations_refused")
            raise HttpError(400, f"invalid attestation: {exc}") from None
        ledger = self.protocol.contracts["TaskLedger"].address
        if att.chain_id != self.protocol.chain_id or att.ledger.lower() != ledger.lower():
            self.count("attestations_refused")
            raise HttpError(400, f"attestation is for chain {att.chain_id} ledger {att.ledger}, not this pool's")
        if not att.accepted:
            raise HttpError(400, "only accepting attestations are collected here")
        if not self._is_validator(att.validator):
            self.count("attestations_refused")
            raise HttpError(403, f"{att.validator} is not an active, staked validator")
        sub = self._submission(att.submission_id)
        if sub is None:
            raise HttpError(404, f"submission {att.submission_id} is not in pool {self.pool_id}")
        if (sub["rollouts_cid"] != att.rollouts_cid or sub["proofs_hash"].lower() != att.proofs_hash.lower()
                or sub["policy_step"] != att.policy_step):
            self.count("attestations_refused")
            raise HttpError(400, f"attestation does not match submission {att.submission_id} on-chain")
        if same_operator(att.validator, self._owner(att.validator), sub["node"], self._owner(sub["node"])):
            self.count("attestations_refused")
            log.warning("attestation of submission %d by %s refused: same operator as worker %s",
                        att.submission_id, att.validator, sub["node"])
            raise HttpError(403, f"validator {att.validator} shares its operator with worker {sub['node']}: "
                                 f"a worker's own validators do not count towards the quorum")
        key = f"{att.submission_id}:{att.validator.lower()}"
        with self._intake_lock:
            if self.state.record("attestation", key) is None:
                self.state.put("attestation", key, "valid", {"submission_id": att.submission_id,
                                                              "validator": att.validator,
                                                              "owner": self._owner(att.validator),
                                                              "signature": att.signature})
                self.count("attestations_received")
        return {"ok": True, "submission_id": att.submission_id}

    def _post_attestation(self, _query: dict[str, list[str]], body: Any) -> Any:
        return self.accept_attestation(body)

    def pull_attestations(self, max_pages: int = 4) -> None:
        """Ask every active validator for attestations since the last pull (after a restart, or missed
        POSTs): pages of `MAX_ATTESTATIONS_PAGE`, at most `max_pages` per validator per call (the cursor
        carries on next time), each request with a total deadline. Only listed validators are asked
        (`Directory.by_role`: staked at least the validator minimum, the most staked first); one that
        fails or stalls is benched like any peer (`Directory.penalise`) and not asked meanwhile."""
        assert self.directory is not None
        for node in self.directory.by_role("validator"):
            if not node.endpoint or self.directory.benched(node.address):
                continue
            key = f"pulled:{node.address.lower()}"
            cursor = self.state.get(key, 0.0)
            since, after = (float(cursor), -1) if not isinstance(cursor, list) else (float(cursor[0]), int(cursor[1]))
            for _ in range(max_pages):
                try:
                    resp = fetch("GET", node.endpoint.rstrip("/") + "/attestations",
                                 params={"since": repr(since), "after": after, "limit": MAX_ATTESTATIONS_PAGE},
                                 deadline=5.0, max_bytes=MAX_ATTESTATIONS_PAGE * 4096)
                    items = resp.json() if resp.ok else []
                except (PeerHttpError, ValueError, RecursionError) as exc:  # stalled, cut off or garbled
                    log.debug("pulling attestations from %s: %s", node.address, exc)
                    self.directory.penalise(node.address, exc)
                    break
                if not isinstance(items, list):
                    break
                for item in items[:MAX_ATTESTATIONS_PAGE]:
                    if not isinstance(item, dict):
                        continue
                    try:
                        cur = (float(item.pop("_updated_at")), int(item.pop("_id", -1)))
                    except (KeyError, TypeError, ValueError, OverflowError):  # 10**400 or 1e999: issue 32
                        continue
                    since, after = max((since, after), cur)
                    try:
                        self.accept_attestation(item)
                    except HttpError as exc:
                        log.debug("pulled attestation refused: %s", exc.message)
                self.state.set(key, [since, after])
                if len(items) < MAX_ATTESTATIONS_PAGE:
                    break

    # -- training ------------------------------------------------------------------------------
    def _attestation_sets(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for r in self.state.records("attestation"):
            out.setdefault(int(r["data"]["submission_id"]), set()).add(r["data"]["validator"].lower())
        return out

    def _assigned(self, sid: int) -> tuple[str, ...]:
        """The slots (validators, lower case; one may hold several) the chain assigned to submission `sid`: only
        their attestations count. Computed once (kept in the state store: an assignment never changes); empty
        while it cannot be."""
        got = self._assignments.get(sid)
        if got is not None:
            return got
        rec = self.state.record("assignment", sid)
        if rec is None:
            c = (self.state.record("claim", sid) or {}).get("data", {})  # followed: no search of the chain's logs
            claim = (bytes.fromhex(c["seed"]), int(c["block"]), c["node"]) if "block" in c else None
            try:
                validators = self.assigner.for_task(sid, claim)
            except IntellectError as exc:
                log.warning("submission %d: its assigned validators could not be read (retried): %s", sid, exc)
                return ()
            if validators is None:
                return ()
            self.state.put("assignment", sid, "assigned", {"validators": validators})
            log.info("submission %d: assigned validators %s", sid, ", ".join(validators) or "none")
        else:
            validators = rec["data"]["validators"]
        got = self._assignments[sid] = tuple(validators)
        return got

    def _trusted(self, subs: dict[int, dict[str, Any]]) -> set[int]:
        """The pending submissions of `subs` the trust rule lets train (`trusted_submissions`)."""
        now = time.time()
        pending = {sid for sid, sub in subs.items() if sub["status"] == "pending"}
        for sid in pending:
            if "seen_at" not in subs[sid]:  # recorded by a trainer before issue 33: its wait starts now
                subs[sid]["seen_at"] = now
                with self.state.transaction():  # never undo a status the follower set meanwhile
                    rec = self.state.record("submission", sid)
                    if rec is not None and rec["status"] == "pending":
                        self.state.put("submission", sid, "pending", {"seen_at": now})
        records = [r for r in self.state.records("attestation") if int(r["data"]["submission_id"]) in pending]
        return trusted_submissions(records, subs, self._assigned, quorum=self.quorum, now=now,
                                   wait_s=self.cfg.trainer.attestation_wait)

    def _next_ready(self, exclude: set[int]) -> int | None:
        """The oldest attested, fresh, still-unchallenged submission not in `exclude`, or None."""
        subs = {int(r["id"]): r["data"] | {"status": r["status"]} for r in self.state.records("submission")}
        ready, stale = ready_submissions(self._trusted(subs), subs, train_step=self.gt.step,
                                         async_level=self.pool.params.async_level)
        for sid in stale:
            self.state.put("submission", sid, "stale")
        ready = [sid for sid in ready if sid not in exclude]
        canaries = canary_ids(self.state)
        self.metrics.set("ready_submissions", sum(1 for sid in ready if sid not in canaries))
        for sid in ready:
            t = self.protocol.task(sid)  # re-check on-chain: never train on challenged work
            if t.status != TaskStatus.SUBMITTED:
                self._left_out(sid, t.status)
                continue
            if sid in canaries:  # never trained on; past this point its record moves like any other's
                continue
            return sid
        return None

    def _left_out(self, sid: int, status: Any) -> None:
        """Record a submission the trainer will not train on because of its chain status: `rejected` once its
        challenge is upheld (bad work, whoever sent it), `excluded` otherwise (challenged, voided). Canaries go
        the same way (issue 21: the public /status must not tell them apart); a consumed one stays consumed."""
        upheld = status == TaskStatus.UPHELD
        with self.state.transaction():  # read and write as one: a step consuming it meanwhile is never undone
            rec = self.state.record("submission", sid)
            if rec is None or rec["status"] in ("consumed", "rejected"):
                return
            self.state.put("submission", sid, "rejected" if upheld else "excluded",
                           {"chain_status": status.name.lower()})

    def _on_event(self, e: Any) -> None:
        """The follower's events: a TaskClaimed and a WorkSubmitted of this pool are recorded (the claim's seed and
        block give the submission's assigned validators); a ChallengeResolved upholding one of
        its recorded submissions marks it `rejected` (whatever its status but consumed)."""
        if e.event == "WorkSubmitted":
            self._record_submission(e)
        elif e.event == "TaskClaimed" and int(e.args["poolId"]) == self.pool_id:  # its seed and block: the assignment
            self.state.put("claim", int(e.args["taskId"]), "claimed", {
                "seed": bare_hex(e.args["seed"]), "block": e.block_number, "node": e.args["node"]})
        elif e.event == "ChallengeResolved" and e.args["upheld"]:
            self._left_out(int(e.args["challengeId"]), TaskStatus.UPHELD)

    def _signal_groups(self, samples: list[Any]) -> int:
        """Groups the step can learn from: with the zero-advantage filter on, those whose advantages are
        not all zero (INTELLECT-2's online filtering); every group otherwise."""
        return signal_groups(samples, self.cfg.trainer.grpo.filter_zero_advantage)

    def _load_rollouts(self, sid: int) -> Any:
        sub = self._submission(sid)
        assert sub is not None
        path = self.data_dir / "rollouts" / f"{sid}.rollouts"
        if not path.is_file():
            assert self.directory is not None
            self.refresh_ipfs_peers(extra=[self.directory.service(sub["node"], "ipfs") or ""])
            data = self.ipfs.cat(sub["rollouts_cid"], max_size=self.cfg.ipfs.max_fetch_bytes)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(data)
            tmp.replace(path)
        rf = RolloutFile.read(path)
        if rf.meta.policy_step != sub["policy_step"] or rf.meta.worker.lower() != sub["node"].lower():
            raise AgentError(f"rollout file of submission {sid} does not match its on-chain record")
        return rf

    def _plan_samples(self, sid: int, plan: dict[str, Any]) -> list[Any] | None:
        """The verified samples of submission `sid`, or None (logged, state updated) if it cannot be used
        now: not retrievable yet (tried again later) or unusable (left out; the plan is dropped)."""
        if sid in self._verified:  # a plan waiting for more signal re-reads its submissions every poll
            return self._verified[sid]
        try:
            rf = self._load_rollouts(sid)
            got, diffs = verified_samples(rf, self.task_set, self.gt.tokenizer, self.cfg.tasks.length_alpha,
                                          self.cfg.tasks.length_scope)
            if diffs["max_reward_diff"] > 1e-4 or diffs["max_advantage_diff"] > 1e-3:
                log.warning("submission %d: the file's rewards/advantages are off by %.3g/%.3g from the "
                            "recomputed ones (attested anyway); training on the recomputed values",
                            sid, diffs["max_reward_diff"], diffs["max_advantage_diff"])
            self._verified[sid] = got
            return got
        except (IpfsError, ParseUnavailable, RolloutFileError, AgentError, UntrustedValueError, KeyError) as exc:
            # attested but not retrievable (its worker went away), not judged (an old Parquet file whose isolated
            # reader this node could not run to its end) or not what was attested: leave it out
            rec = self.state.record("submission", sid)
            fails = int((rec or {}).get("data", {}).get("load_failures", 0)) + 1
            if fails < 3 and isinstance(exc, IpfsError | ParseUnavailable):
                log.warning("submission %d: rollout file not retrievable or readable yet (%s), try %d", sid, exc, fails)
                self.state.put("submission", sid, (rec or {}).get("status", "pending"), {"load_failures": fails})
                return None
            log.warning("submission %d left out of step %d: %s", sid, plan["step"], exc)
            self.state.put("submission", sid, "unusable", {"error": str(exc)[:300]})
            self.state.set("plan", None)
            return None

    def train_once(self) -> bool:
        """Train and publish one step if a batch is ready; True if it did."""
        self.doing = f"waiting for attested rollouts for step {self.gt.step + 1}"
        plan = self.state.get("plan")
        if plan is not None and plan["step"] != self.gt.step + 1:
            plan = None
        if plan is not None and "stats" not in plan:  # a plan from before a restart: re-check on-chain
            for sid in plan["submissions"]:
                t = self.protocol.task(sid)
                if t.status != TaskStatus.SUBMITTED:
                    self._left_out(sid, t.status)
                    plan = None
            if plan is None:
                self.state.set("plan", None)
        if plan is None:
            plan = {"step": self.gt.step + 1, "submissions": []}
        samples: list[Any] = []
        for sid in plan["submissions"]:
            got = self._plan_samples(sid, plan)
            if got is None:
                return False
            samples += got
        # online filtering: refill from further submissions until the batch has `batch_groups` groups with
        # signal, instead of training on fewer (a plan survives restarts; its submissions stay reserved)
        while (have := self._signal_groups(samples)) < self.cfg.trainer.batch_groups:
            sid = self._next_ready(exclude=set(plan["submissions"]))  # never a canary (_next_ready skips them)
            if sid is None:
                if plan["submissions"]:
                    self.state.set("plan", plan)
                if self._refill_since is None or self._refill_since[0] != plan["step"]:
                    self._refill_since = (plan["step"], time.monotonic())
                waited = time.monotonic() - self._refill_since[1]
                wait = self.cfg.trainer.refill_wait
                if have > 0 and wait is not None and waited >= wait:
                    log.warning("step %d: %d/%d groups with signal and no further attested rollouts for %.0f s: "
                                "training on those (trainer.refill_wait)", plan["step"], have,
                                self.cfg.trainer.batch_groups, waited)
                    break
                if have == 0 and samples and waited >= self.no_signal_after:
                    self.report_no_signal(plan, samples, waited)  # attested rollouts, none with signal: say so
                    return False
                self.doing = (f"step {plan['step']}: {have}/{self.cfg.trainer.batch_groups} groups with signal from "
                              f"{len(plan['submissions'])} attested submission(s); waiting for more attested rollouts")
                return False
            got = self._plan_samples(sid, plan)
            if got is None:
                return False
            plan["submissions"].append(sid)
            self.state.set("plan", plan)
            self._refill_since = (plan["step"], time.monotonic())
            samples += got
            if self._signal_groups(got):
                self.no_signal = None
            log.info("step %d: submission %d added to the batch: %d/%d groups with signal", plan["step"], sid,
                     self._signal_groups(samples), self.cfg.trainer.batch_groups)
        self.doing = f"training step {plan['step']} on {len(samples)} rollouts"
        try:
            stats = self.gt.train_step(samples)
        except (UntrustedValueError, NonFiniteWeightsError, NoSignalError) as exc:
            # nothing was saved or published; the batch is never tried again
            log.error("step %d refused, nothing published: %s; submissions %s left out",
                      plan["step"], exc, plan["submissions"])
            with self.state.transaction():
                for sid in plan["submissions"]:
                    self.state.put("submission", sid, "unusable", {"error": str(exc)[:300]})
                self.state.set("plan", None)
            self.metrics.inc("errors_total", kind=type(exc).__name__)
            return False
        plan["rollouts"] = len(samples)
        plan["stats"] = {"loss": stats.loss, "reward_mean": stats.reward_mean, "samples_trained": stats.samples,
                         "dropped_groups": stats.dropped_groups, "tokens": stats.tokens, "seconds": stats.seconds}
        self.state.set("plan", plan)
        self.metrics.set("train_loss", stats.loss)
        self.metrics.set("train_reward_mean", stats.reward_mean)
        self.count("steps_trained")
        self.doing = f"publishing step {plan['step']}"
        self._publish(self.gt.step)
        self.maybe_evaluate(self.gt.step)
        return True

    def report_no_signal(self, plan: dict[str, Any], samples: list[Any], waited: float) -> Any:
        """Say (log at most once a minute, `doing`, /status `no_signal` and `warning`, shown by the dashboard)
        that the step's attested rollouts carry no group with signal, with their solve rate and what to change
        (`intellect.agents.roles.signal`)."""
        group_size = self.rules.group_size if self.rules is not None else self.cfg.worker.group_size
        self.no_signal = no_signal_report(samples, step=plan["step"], submissions=len(plan["submissions"]),
                                          waited_s=waited, group_size=group_size,
                                          length_alpha=self.cfg.tasks.length_alpha,
                                          batch_groups=self.cfg.trainer.batch_groups)
        self.doing = self.no_signal.message
        if time.monotonic() - self._no_signal_logged >= 60:
            self._no_signal_logged = time.monotonic()
            log.warning("%s", self.no_signal.message)
        return self.no_signal

    def pool_heartbeat(self) -> bool:
        """Tell the chain this trainer is alive (`setPoolState(open)`, issue 37): at once the first time, then when
        a quarter of the pool's lease duration passed since its last checkpoint or heartbeat. From the first
        heartbeat on, the ledger takes claims only up to a lease duration after the latest of either, so a trainer
        that dies stops its pool's claims within one lease. True if sent."""
        if self._beats and time.monotonic() - self._last_beat < self.pool.params.lease_duration / 4:
            # chain time can outrun this clock (a devnet's evm_increaseTime): every 5 s, beat at once if stalled
            if time.monotonic() - getattr(self, "_state_checked", 0.0) < 5:
                return False
            self._state_checked = time.monotonic()
            if self.protocol.pool_state(self.pool_id).state != PoolState.STALLED:
                return False
        self._last_beat = time.monotonic()
        try:
            self.protocol.heartbeat(self.pool_id)
        except ContractRevert as exc:  # paused or finished by its owner: nothing to keep alive
            log.info("pool %d heartbeat not taken: %s", self.pool_id, exc)
            return False
        self._beats += 1
        return True

    def finish_pool(self) -> None:
        """Finish the pool on-chain at `max_steps` (`trainer.finish_pool`), once: claims stop, the work submitted
        stays payable, the unreserved budget goes back to the pool's owner."""
        if self.state.get("pool_finished"):
            return
        try:
            if self.protocol.pool_state(self.pool_id).state != PoolState.FINISHED:
                self.protocol.set_pool_state(self.pool_id, PoolState.FINISHED)
                log.info("pool %d finished at step %d (trainer.max_steps): claims stop, the unreserved budget "
                         "went back to its owner", self.pool_id, self.gt.step)
        except ContractRevert as exc:
            log.warning("pool %d not finished: %s", self.pool_id, exc)
        self.state.set("pool_finished", True)

    def record_used_attestations(self) -> None:
        """Record on-chain (`AttesterBook.recordAttestations`) the validators whose attestations each trained
        submission counted on: they are paid per recorded attestation once its window closes (issue 21). Only
        when the pool's owner set a reward per attestation; each submission once. A failure logs and is tried
        again on the next pass; a closed window or an empty budget gives up on that submission."""
        if "AttesterBook" not in self.protocol.contracts:
            return
        todo = [int(r["id"]) for r in self.state.records("submission", "consumed")
                if self.state.record("attester_record", int(r["id"])) is None]
        if not todo:
            return
        try:
            if self.protocol.attester_pool_rule(self.pool_id).reward_per_attestation == 0:
                return
            used = self._attestation_sets()
            for sid in todo:
                # the attestations the quorum counted (assigned validators); the book takes at most 16 per call
                validators = sorted(used.get(sid, set()) & set(self._assigned(sid)))[:16]
                recorded: list[str] = []
                try:
                    if validators:
                        recorded = [r.validator for r in self.protocol.record_attestations(sid, validators)]
                except ContractRevert as exc:
                    if exc.name not in ("AttesterBookNotAttester", "AttesterBookBadRecord"):
                        if exc.name not in ("AttesterBookWindowClosed", "AttesterBookInsufficientBudget"):
                            raise
                        log.warning("submission %d: attestations not recorded: %s", sid, exc)
                        self.state.put("attester_record", sid, "failed", {"error": str(exc)[:300]})
                        continue
                    for v in validators:  # one validator exited, or recorded already: record the others alone
                        try:
                            recorded += [r.validator for r in self.protocol.record_attestations(sid, [v])]
                        except ContractRevert as one:
                            log.info("submission %d: attestation of %s not recorded: %s", sid, v, one.name)
                self.state.put("attester_record", sid, "recorded", {"validators": recorded})
                if recorded:
                    log.info("submission %d: recorded the attestations of %d validator(s)", sid, len(recorded))
        except Exception as exc:
            self.metrics.inc("errors_total", kind=type(exc).__name__)
            log.warning("recording used attestations failed (retried later): %s", exc)

    # -- evaluation ----------------------------------------------------------------------------
    def _load_eval_tasks(self) -> list[Any]:
        """The held-out tasks (`trainer.eval_tasks`, else the pool rules' held-out split), at most
        `trainer.eval_max_tasks` of them; empty when evaluation is off or there is no held-out set."""
        t = self.cfg.trainer
        if not t.eval_every:
            return []
        source = t.eval_tasks or getattr(self, "held_out_source", None)
        if not source:
            log.warning("trainer.eval_every is %d but no held-out set: set trainer.eval_tasks or name one in "
                        "the pool rules (heldout_cid)", t.eval_every)
            return []
        ts = source if isinstance(source, TaskSet) else TaskSet.load(Path(source))
        return list(ts)[: t.eval_max_tasks]

    def eval_max_tokens(self) -> int:
        """Completion budget of an evaluation: the largest CPU thinking budget of the pool
        (`held_out_max_tokens`, shared with `intellect-agent eval --rules/--pool`)."""
        return held_out_max_tokens(self.cfg.tasks.budgets)

    def maybe_evaluate(self, step: int, force: bool = False) -> bool:
        """Queue checkpoint `step` for held-out evaluation when `trainer.eval_every` divides it (or `force`): it
        runs on the evaluation thread with its own engine (issue 37), never pausing a training step. True if
        queued."""
        every = self.cfg.trainer.eval_every
        if not self.eval_tasks or not every or (step % every and not force):
            return False
        if self.evaluator is None:
            self.evaluator = BackgroundEvaluator(self.evaluate_step, name="evaluation")
            self._closers.append(self.evaluator.stop)
        self.evaluator.submit(step)
        return True

    def evaluate_step(self, step: int) -> Any:
        """Evaluate checkpoint `step` on the held-out tasks now, on the evaluation engine (made on first use),
        and record the result (state `eval`, metrics). Runs on the evaluation thread; None if it failed."""

        if self._eval_engine is None:
            device, dtype = resolve(self.cfg.trainer.device, self.cfg.trainer.dtype, "trainer")
            self._eval_engine = TransformersEngine(device=device, dtype=dtype)
        try:
            result = evaluate_checkpoint(self.gt.checkpoint_path(step), self.eval_tasks,
                                         max_tokens=self.eval_max_tokens(), length_alpha=self.cfg.tasks.length_alpha,
                                         length_scope=self.cfg.tasks.length_scope, task_set="held-out", engine=self._eval_engine,
                                         chat_template=self.rules is not None and self.rules.model.chat_template == "model")
        except Exception as exc:  # an evaluation must never stop training
            self.metrics.inc("errors_total", kind="eval")
            log.exception("evaluation of step %d failed: %s", step, exc)
            return None
        if self.rules is not None:
            result = result.model_copy(update={"rules_cid": self.pool.params.rules_cid})
        self.state.put("eval", step, "done", result.model_dump())
        self.metrics.set("eval_pass_at_1", result.pass_at_1)
        self.metrics.set("eval_mean_reward", result.mean_reward)
        self.metrics.set("eval_step", step)
        return result

    def loop(self) -> None:
        # ChallengeResolved carries no pool id: the events unfiltered, _on_event keeps this pool's
        stream = EventStream(self.protocol, ["TaskClaimed", "WorkSubmitted", "ChallengeResolved"],
                             cursor_store=StateCursorStore(self.state, "trainer"),
                             confirmations=self.cfg.chain.confirmations, poll_interval=0.5)
        follower = threading.Thread(target=lambda: stream.run(self._on_event, until=self.stop_event.is_set),
                                    name="events", daemon=True)
        follower.start()
        last_pull = 0.0
        while not self.stop_event.is_set():
            try:
                if time.monotonic() - last_pull > 5:
                    self.refresh_ipfs_peers()
                    self.pull_attestations()
                    self.record_used_attestations()
                    sweep_stored(self)  # unpin pushed files never submitted or out of their window
                    last_pull = time.monotonic()
                if self.gt.step >= self.cfg.trainer.max_steps:
                    self.doing = f"done: {self.gt.step} steps; serving checkpoints"
                    if self.cfg.trainer.finish_pool:
                        self.finish_pool()
                    else:
                        self.pool_heartbeat()
                elif self.train_once():
                    continue
                else:
                    self.pool_heartbeat()
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("trainer step failed; retrying")
            self.wait(self.cfg.trainer.poll_interval)
        stream.stop()
        follower.join(timeout=5)

    def status(self) -> dict[str, Any]:
        """The runtime's status and the newest `server.status_items` steps, evaluations, submissions (with
        their attestations) and consumed ids, oldest first, each list's total beside it: bounded whatever
        the history (a year of steps costs the same request as an hour)."""
        doc = super().status()
        n = self.cfg.server.status_items
        steps = [{"step": int(r["id"]), "status": r["status"], "checkpoint_cid": r["data"].get("checkpoint_cid"),
                  "submissions": r["data"].get("submissions", []), "rollouts": r["data"].get("rollouts", 0),
                  "mean_reward": (r["data"].get("stats") or {}).get("reward_mean"),
                  "loss": (r["data"].get("stats") or {}).get("loss")} for r in self.state.latest("step", n)]
        steps.sort(key=lambda s: s["step"])
        evals = sorted(({"step": int(r["id"]), **r["data"]} for r in self.state.latest("eval", n)),
                       key=lambda e: e["step"])
        by_step = {e["step"]: e for e in evals}
        for s in steps:  # the dashboard and the demo's report read the held-out numbers per step
            if s["step"] in by_step:
                s["eval_pass_at_1"] = by_step[s["step"]]["pass_at_1"]
                s["eval_mean_reward"] = by_step[s["step"]]["mean_reward"]
        subs = sorted(self.state.latest("submission", n), key=lambda r: int(r["id"]))
        doc.update({
            "policy_step": self.gt.step if self.gt is not None else None,
            "max_steps": self.cfg.trainer.max_steps,
            "steps": steps,
            "steps_total": self.state.count("step"),
            "consumed": sorted(int(r["id"]) for r in self.state.latest("submission", n, status="consumed")),
            "consumed_total": self.state.count("submission", "consumed"),
            "submissions": [{"submission_id": int(r["id"]), "status": r["status"], "node": r["data"].get("node"),
                             "policy_step": r["data"].get("policy_step"),
                             "attestations": sorted({a["data"]["validator"].lower()
                                                     for a in self.state.with_prefix("attestation", f"{r['id']}:")}),
                             "assigned": sorted(self._assignments.get(int(r["id"]), ())),
                             "step": r["data"].get("step")} for r in subs],
            "submissions_total": self.state.count("submission"),
            "quorum": self.quorum,
            "evals": evals,
            "evals_total": self.state.count("eval"),
            "evaluating": self.evaluator.running if self.evaluator is not None else None,
            "no_signal": self.no_signal.model_dump() if self.no_signal is not None else None,
            "warning": self.no_signal.message if self.no_signal is not None else None,
        })
        return doc
