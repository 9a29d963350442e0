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
           and: a challenge of one of its submissions upheld → slash that submission's attesters with their
           signatures (`attester_slash`, issue 33)

Crash safety: the chosen batch is recorded (`plan`) before training; the checkpoint dir is
written atomically; on restart the trainer resumes from its newest local checkpoint, publishes
it if the chain lacks it, and marks the plan's submissions consumed only once the checkpoint is
on-chain. A submission is consumed at most once.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

from intellect.agents.engines import TransformersEngine
from intellect.agents.grpo import UntrustedValueError
from intellect.agents.grpo_trainer import NonFiniteWeightsError, NoSignalError, signal_groups
from intellect.agents.hardware import resolve
from intellect.agents.roles import trainer_ranks
from intellect.agents.roles._runtime import Agent, AgentError, StateCursorStore, load_task_set, setup_logging
from intellect.agents.roles.assignment import Assigner
from intellect.agents.roles.attestation_intake import (
    AttestationIntake,
    pull_attestations,
    record_trained_attestations,
    same_operator,
)
from intellect.agents.roles.attester_slash import slash_upheld_attesters
from intellect.agents.roles.canary import CanaryInjector
from intellect.agents.roles.checkpoint_publish import (
    base_model,
    finish_plan,
    open_policy,
    publish_step,
    warm_start_recipe,
)
from intellect.agents.roles.eval_thread import BackgroundEvaluator
from intellect.agents.roles.evidence_store import serve_stores, sweep_stores
from intellect.agents.roles.held_out import eval_due, evaluate_and_record, load_eval_tasks
from intellect.agents.roles.pool_lifecycle import Heartbeat, finish_pool
from intellect.agents.roles.pool_rules import apply_pool_rules
from intellect.agents.roles.signal import NO_SIGNAL_AFTER_S, no_signal_report
from intellect.agents.roles.submission_log import (
    CURSOR,
    FOLLOWED_EVENTS,
    assigned_slots,
    lookup_submission,
    record_event,
)
from intellect.agents.roles.trainer_batch import (
    current_plan,
    load_rollouts,
    next_ready,
    plan_samples,
    ready_submissions,
    train_step,
    trust_pending,
    trusted_submissions,
    verified_samples,
)
from intellect.agents.roles.trainer_status import trainer_status
from intellect.sdk import EventStream
from intellect.sdk.shardcast import SERVER_LIMITS as LIMITS
from intellect.sdk.shardcast import Origin
from intellect.verifier.assignment import DEV_CHAIN_IDS, assignment_size, effective_quorum
from intellect.verifier.tasks import TaskSet

# the functions that moved to the trainer's modules stay importable from here (tests and tools import them so)
__all__ = ["DEV_CHAIN_IDS", "Trainer", "effective_quorum", "ready_submissions", "same_operator", "trainer_agent",
           "trusted_submissions", "verified_samples", "warm_start_recipe"]

log = logging.getLogger(__name__)


class Trainer(Agent):
    """The trainer role: follow the pool's events, keep the attestations it trusts, train a step on a batch of
    attested, fresh, unchallenged submissions and publish it. The pieces are module functions: the records
    (`submission_log`), the attestations (`attestation_intake`), the batch (`trainer_batch`), checkpoints
    (`checkpoint_publish`), the pool's heartbeat and end (`pool_lifecycle`) and /status (`trainer_status`)."""

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
        self.intake: AttestationIntake | None = None
        """the attestations' checks and store (`attestation_intake.AttestationIntake`), made in connect()"""
        self.heartbeat: Heartbeat | None = None
        """the pool's heartbeat (`pool_lifecycle.Heartbeat`), made in connect()"""
        self.quorum = max(1, self.cfg.trainer.attestation_quorum or 1)
        self.assigner: Any = None
        """the chain's assignment of validators to submissions (`roles.assignment.Assigner`), made in start()"""
        self._assignments: dict[int, tuple[str, ...]] = {}
        self.gt: Any = None
        self.origin: Any = None
        self.no_signal: Any = None
        """the last `signal.NoSignalReport` of the step being filled (None once a group with signal came)"""
        self.no_signal_after = NO_SIGNAL_AFTER_S
        self._no_signal_logged = 0.0
        self.canary: CanaryInjector | None = None
        """the canary submissions' thread (`trainer.canary`, issue 21), made in start() when on"""

    # -- set-up --------------------------------------------------------------------------------
    def base_model(self) -> Path:
        return base_model(self.cfg)

    def connect(self) -> None:
        super().connect()
        self.intake = AttestationIntake(self.protocol, self.state, self.pool_id, lookup=self._submission,
                                        count=self.count)
        self.heartbeat = Heartbeat(self.protocol, self.pool_id, self.pool.params.lease_duration)

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
        self.server.route("POST", "/attestations", lambda _q, body: self.accept_attestation(body))
        serve_stores(self)  # workers' rollout files, challengers' evidence
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
        self.eval_tasks = load_eval_tasks(self.cfg.trainer, getattr(self, "held_out_source", None))
        if self.eval_tasks and self.state.record("eval", self.gt.step) is None:
            self.maybe_evaluate(self.gt.step, force=True)  # the baseline the later evaluations compare with

    def _load_rules_and_tasks(self) -> None:
        """The pool's rules and task sets, pinned in this trainer's store and served by its gateway so
        every node can resolve the CIDs the chain names."""
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
        self.gt = open_policy(self.cfg, self.data_dir, self.pool.params.async_level)
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
        cid = publish_step(self.origin, self.gt, self.protocol, self.state, self.pool_id, step, self.cfg.trainer.model)
        assert self.heartbeat is not None
        self.heartbeat.checkpoint()
        self._finish_plan(step, cid)
        self.metrics.set("policy_step", step)
        return cid

    def _finish_plan(self, step: int, cid: str) -> None:
        self._verified.clear()
        finish_plan(self.state, step, cid, self.count)

    # -- attestations and the chain's records --------------------------------------------------
    def _submission(self, sid: int) -> dict[str, Any] | None:
        return lookup_submission(self.protocol, self.state, self.pool_id, sid)

    def accept_attestation(self, body: Any) -> dict[str, Any]:
        """Check one attestation and keep it (`AttestationIntake.accept`); HttpError with the reason otherwise."""
        assert self.intake is not None
        return self.intake.accept(body)

    def _assigned(self, sid: int) -> tuple[str, ...]:
        return assigned_slots(sid, state=self.state, assigner=self.assigner, cache=self._assignments)

    def _on_event(self, e: Any) -> None:
        record_event(self.state, self.pool_id, e)

    # -- training ------------------------------------------------------------------------------
    def _next_ready(self, exclude: set[int]) -> int | None:
        """The oldest attested, fresh, still-unchallenged submission not in `exclude` (never a canary), or None."""
        def trust(subs: dict[int, dict[str, Any]]) -> set[int]:
            return trust_pending(self.state, subs, self._assigned, quorum=self.quorum,
                                 wait_s=self.cfg.trainer.attestation_wait)

        sid, waiting = next_ready(self.protocol, self.state, trust, train_step=self.gt.step,
                                  async_level=self.pool.params.async_level, exclude=exclude)
        self.metrics.set("ready_submissions", waiting)
        return sid

    def _signal_groups(self, samples: list[Any]) -> int:
        """Groups the step can learn from: with the zero-advantage filter on, those whose advantages are
        not all zero (INTELLECT-2's online filtering); every group otherwise."""
        return signal_groups(samples, self.cfg.trainer.grpo.filter_zero_advantage)

    def _load_rollouts(self, sid: int) -> Any:
        sub = self._submission(sid)
        assert sub is not None and self.directory is not None
        directory = self.directory
        return load_rollouts(sid, sub, data_dir=self.data_dir, ipfs=self.ipfs, max_bytes=self.cfg.ipfs.max_fetch_bytes,
                             refresh_peers=lambda: self.refresh_ipfs_peers(
                                 extra=[directory.service(sub["node"], "ipfs") or ""]))

    def _plan_samples(self, sid: int, plan: dict[str, Any]) -> list[Any] | None:
        return plan_samples(sid, plan, state=self.state, cache=self._verified, load=self._load_rollouts,
                            task_set=self.task_set, tokenizer=self.gt.tokenizer,
                            length_alpha=self.cfg.tasks.length_alpha, length_scope=self.cfg.tasks.length_scope)

    def train_once(self) -> bool:
        """Train and publish one step if a batch is ready; True if it did."""
        self.doing = f"waiting for attested rollouts for step {self.gt.step + 1}"
        plan = current_plan(self.protocol, self.state, self.gt.step + 1)
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
            stats = train_step(self.gt, samples, self.cfg.tasks.problem_order, self.cfg.worker.group_size)
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

    # -- evaluation ----------------------------------------------------------------------------
    def maybe_evaluate(self, step: int, force: bool = False) -> bool:
        """Queue checkpoint `step` for held-out evaluation when due (`held_out.eval_due`): it runs on the evaluation
        thread with its own engine (issue 37), never pausing a training step. True if queued."""
        if not eval_due(step, self.cfg.trainer.eval_every, self.eval_tasks, force):
            return False
        if self.evaluator is None:
            self.evaluator = BackgroundEvaluator(self.evaluate_step, name="evaluation")
            self._closers.append(self.evaluator.stop)
        self.evaluator.submit(step)
        return True

    def evaluate_step(self, step: int) -> Any:
        """Evaluate checkpoint `step` now on the evaluation engine (made on first use) and record it
        (`held_out.evaluate_and_record`). Runs on the evaluation thread; None if it failed."""
        if self._eval_engine is None:
            device, dtype = resolve(self.cfg.trainer.device, self.cfg.trainer.dtype, "trainer")
            self._eval_engine = TransformersEngine(device=device, dtype=dtype)
        return evaluate_and_record(step, self.gt.checkpoint_path(step), self.eval_tasks, self.cfg.tasks,
                                   engine=self._eval_engine,
                                   chat_template=self.rules is not None and self.rules.model.chat_template == "model",
                                   rules_cid=self.pool.params.rules_cid if self.rules is not None else None,
                                   state=self.state, metrics=self.metrics)

    def loop(self) -> None:
        # not all of them carry a pool id: the events unfiltered, _on_event keeps this pool's
        stream = EventStream(self.protocol, list(FOLLOWED_EVENTS),
                             cursor_store=StateCursorStore(self.state, CURSOR),
                             confirmations=self.cfg.chain.confirmations, poll_interval=0.5)
        follower = threading.Thread(target=lambda: stream.run(self._on_event, until=self.stop_event.is_set),
                                    name="events", daemon=True)
        follower.start()
        assert self.directory is not None and self.heartbeat is not None  # made in connect()
        last_pull = 0.0
        while not self.stop_event.is_set():
            try:
                if time.monotonic() - last_pull > 5:
                    self.refresh_ipfs_peers()
                    pull_attestations(self.directory, self.state, self.accept_attestation)
                    record_trained_attestations(self)  # AttesterBook: a root a step, or a record a submission
                    slash_upheld_attesters(self.protocol, self.state, self.metrics, canaries=bool(self.canary))
                    sweep_stores(self)  # unpin pushed files and evidence no longer needed
                    last_pull = time.monotonic()
                if self.gt.step >= self.cfg.trainer.max_steps:
                    self.doing = f"done: {self.gt.step} steps; serving checkpoints"
                    if self.cfg.trainer.finish_pool:
                        finish_pool(self.protocol, self.state, self.pool_id, self.gt.step)
                    else:
                        self.heartbeat.beat()
                elif self.train_once():
                    continue
                else:
                    self.heartbeat.beat()
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("trainer step failed; retrying")
            self.wait(self.cfg.trainer.poll_interval)
        stream.stop()
        follower.join(timeout=5)

    def status(self) -> dict[str, Any]:
        """The runtime's status and the newest `server.status_items` steps, evaluations, submissions and consumed
        ids (`trainer_status`)."""
        return trainer_status(super().status(), self.state, self.cfg.server.status_items,
                              policy_step=self.gt.step if self.gt is not None else None,
                              max_steps=self.cfg.trainer.max_steps, quorum=self.quorum, assignments=self._assignments,
                              evaluating=self.evaluator.running if self.evaluator is not None else None,
                              no_signal=self.no_signal)


def trainer_agent(cfg: Any) -> Any:
    """What `intellect-agent --role trainer` runs: the `Trainer`; under torchrun (several ranks, issue 38) every
    rank joins the process group first and a rank above 0 gets a `trainer_ranks.Follower` instead (its log lines
    say `trainer-rank<k>`)."""
    if trainer_ranks.group_size() > 1:
        rank = trainer_ranks.join(resolve(cfg.trainer.device, cfg.trainer.dtype, "trainer")[0])[0]
        if rank > 0:
            setup_logging(cfg.log_level, cfg.log_json, role=f"trainer-rank{rank}")
            return trainer_ranks.Follower(rank)
    agent = Trainer(cfg)
    if trainer_ranks.joined():
        agent.close_last(trainer_ranks.release)  # the other ranks leave once this agent has stopped
    return agent
