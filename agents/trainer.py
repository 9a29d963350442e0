"""The trainer agent: owns the pool's policy, trains GRPO steps on attested rollouts only.

    start: register (trainer role) → load/resume the policy → publish step 0 (or the step the
           chain lacks) through Shardcast (origin + manifest on IPFS) and `publishCheckpoint`
    loop:  follow WorkSubmitted → take validator attestations (POST /attestations, and pulled
           from validators' GET /attestations) → a batch of submissions with ≥ quorum valid
           attestations by active, staked validators, fresh (policy ≥ t − async_level) and not
           challenged (re-checked on-chain right before training) → GRPO step → publish t+1

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

import requests

from intellect.agents._runtime import Agent, AgentError, StateCursorStore
from intellect.agents._server import HttpError

__all__ = ["Trainer", "ready_submissions", "warm_start_recipe"]

log = logging.getLogger(__name__)


def warm_start_recipe(tasks: Any) -> Any:
    """The `WarmStartRecipe` for a pool's `TaskSettings`: its synthetic task set (`synthetic:N:SEED`,
    the only source the warm start knows) and every thinking budget a worker may be given, so the
    warm-started policy has seen the exact prompts the pool's workers send."""
    from intellect.agents.learn import WarmStartRecipe

    parts = str(tasks.source).split(":")
    if len(parts) != 3 or parts[0] != "synthetic" or not parts[1].isdigit() or not parts[2].isdigit():
        raise AgentError(f"trainer.model tiny-warm needs tasks.source synthetic:N:SEED, got {tasks.source!r}")
    budgets = tuple(sorted({int(b) for v in tasks.budgets.values() for b in v}))
    return WarmStartRecipe(tasks=int(parts[1]), task_seed=int(parts[2]), target_lengths=budgets)


def ready_submissions(attestations: dict[int, set[str]], submissions: dict[int, dict[str, Any]], *,
                      quorum: int, train_step: int, async_level: int) -> tuple[list[int], list[int]]:
    """(ready, stale) submission ids: ready = ≥ quorum distinct validators and fresh enough for
    training step `train_step`; stale = attested but too old to ever be used. Pure; ids ascending."""
    ready, stale = [], []
    for sid in sorted(submissions):
        sub = submissions[sid]
        if sub.get("status") != "pending":
            continue
        if len(attestations.get(sid, set())) < quorum:
            continue
        if sub["policy_step"] < train_step - async_level:
            stale.append(sid)
        else:
            ready.append(sid)
    return ready, stale


class Trainer(Agent):
    role = "trainer"
    node_role = "trainer"

    def __init__(self, cfg: Any) -> None:
        super().__init__(cfg)
        for name in ("attestations_received", "attestations_refused", "steps_trained", "submissions_consumed"):
            self.counters[name] = int(self.state.get(f"counter:{name}", 0))
        self.metrics.declare("policy_step", "gauge", "latest published policy step")
        self.metrics.declare("ready_submissions", "gauge", "attested, fresh submissions waiting for a step")
        self.metrics.declare("train_loss", "gauge", "loss of the last step")
        self.metrics.declare("train_reward_mean", "gauge", "mean reward of the last step's rollouts")
        self._validator_ok: dict[str, tuple[float, bool]] = {}
        self._intake_lock = threading.Lock()
        self.gt: Any = None
        self.origin: Any = None

    # -- set-up --------------------------------------------------------------------------------
    def base_model(self) -> Path:
        m = self.cfg.trainer.model
        if m == "tiny":
            from intellect.agents.models import tiny_model_dir

            return tiny_model_dir()
        if m == "tiny-warm":
            from intellect.agents.learn import warm_start_cached

            return warm_start_cached(warm_start_recipe(self.cfg.tasks))
        if m == "smollm2":
            from intellect.agents.models import smollm2_dir

            return smollm2_dir()
        p = Path(m)
        if not (p / "config.json").is_file():
            raise AgentError(f"trainer.model {m!r}: not 'tiny', 'tiny-warm', 'smollm2' or an HF model directory")
        return p

    def start(self) -> None:
        super().start()
        from intellect.sdk.shardcast import Origin

        if self.protocol.address.lower() != self.pool.params.trainer.lower():
            raise AgentError(f"this key {self.protocol.address} is not pool {self.pool_id}'s trainer "
                             f"({self.pool.params.trainer}): use the pool's trainer key")
        self.origin = Origin(self.data_dir / "shardcast", ipfs=self.ipfs, host=self.cfg.server.host, port=0,
                             keep=max(self.cfg.trainer.keep_checkpoints, self.pool.params.async_level + 2),
                             shard_size=self.cfg.trainer.shard_size).start()
        self.origin.relay_hints = [self.origin.url]
        self._closers.append(self.origin.stop)
        assert self.server is not None
        self.server.route("POST", "/attestations", self._post_attestation)
        self.ensure_node(stake_amount=0.0001, auto_stake=True)
        self.refresh_ipfs_peers()
        self._init_policy()

    def services(self) -> dict[str, str]:
        out = super().services()
        if self.origin is not None:
            out["shardcast"] = self.origin.url
        return out

    def _init_policy(self) -> None:
        from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, latest_checkpoint

        t = self.cfg.trainer
        ckpt_dir = self.data_dir / "checkpoints"
        max_tokens = max(max(v) for v in self.cfg.tasks.budgets.values())
        config = GRPOConfig(lr=t.learning_rate, optimizer_steps=t.optimizer_steps, max_completion_tokens=max_tokens,
                            async_level=self.pool.params.async_level, seed=t.seed,
                            keep_checkpoints=max(t.keep_checkpoints, self.pool.params.async_level + 2))
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
        log.info("published step %d: %s", step, cid)
        self._finish_plan(step, cid)
        self.metrics.set("policy_step", step)
        return cid

    def _finish_plan(self, step: int, cid: str) -> None:
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

    def _submission(self, sid: int) -> dict[str, Any] | None:
        rec = self.state.record("submission", sid)
        if rec is not None:
            return rec["data"] | {"status": rec["status"]}
        evs = self.protocol.get_events(["WorkSubmitted"], filters={"submissionId": sid, "poolId": self.pool_id})
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
            "policy_step": int(a["policyStep"]), "work_units": int(a["workUnits"])})

    def accept_attestation(self, body: Any) -> dict[str, Any]:
        """Check one attestation (schema, signature, domain, signer's role and stake, match with the
        on-chain submission) and keep it. Raises HttpError with the reason otherwise."""
        from pydantic import ValidationError

        from intellect.agents.attestation import Attestation, AttestationError

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
        key = f"{att.submission_id}:{att.validator.lower()}"
        with self._intake_lock:
            if self.state.record("attestation", key) is None:
                self.state.put("attestation", key, "valid", {"submission_id": att.submission_id,
                                                              "validator": att.validator,
                                                              "signature": att.signature})
                self.count("attestations_received")
        return {"ok": True, "submission_id": att.submission_id}

    def _post_attestation(self, _query: dict[str, list[str]], body: Any) -> Any:
        return self.accept_attestation(body)

    def pull_attestations(self) -> None:
        """Ask every active validator for attestations since the last pull (after a restart, or missed POSTs)."""
        assert self.directory is not None
        for node in self.directory.by_role("validator"):
            if not node.endpoint:
                continue
            since = float(self.state.get(f"pulled:{node.address.lower()}", 0.0))
            try:
                resp = requests.get(node.endpoint.rstrip("/") + "/attestations", params={"since": since}, timeout=5)
                items = resp.json() if resp.ok else []
            except (requests.RequestException, ValueError):
                continue
            newest = since
            for item in items:
                newest = max(newest, float(item.pop("_updated_at", since)))
                try:
                    self.accept_attestation(item)
                except HttpError as exc:
                    log.debug("pulled attestation refused: %s", exc.message)
            self.state.set(f"pulled:{node.address.lower()}", newest)

    # -- training ------------------------------------------------------------------------------
    def _attestation_sets(self) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for r in self.state.records("attestation"):
            out.setdefault(int(r["data"]["submission_id"]), set()).add(r["data"]["validator"].lower())
        return out

    def _choose_batch(self) -> list[int] | None:
        from intellect.sdk import TaskStatus

        subs = {int(r["id"]): r["data"] | {"status": r["status"]} for r in self.state.records("submission")}
        ready, stale = ready_submissions(self._attestation_sets(), subs, quorum=self.cfg.trainer.attestation_quorum,
                                         train_step=self.gt.step, async_level=self.pool.params.async_level)
        for sid in stale:
            self.state.put("submission", sid, "stale")
        self.metrics.set("ready_submissions", len(ready))
        chosen: list[int] = []
        groups = 0
        for sid in ready:
            t = self.protocol.task(sid)  # re-check on-chain: never train on challenged work
            if t.status != TaskStatus.SUBMITTED:
                self.state.put("submission", sid, "excluded", {"chain_status": t.status.name.lower()})
                continue
            chosen.append(sid)
            groups += self.cfg.worker.problems_per_task
            if groups >= self.cfg.trainer.batch_groups:
                return chosen
        return None

    def _load_rollouts(self, sid: int) -> Any:
        from intellect.agents.rollouts import RolloutFile

        sub = self._submission(sid)
        assert sub is not None
        path = self.data_dir / "rollouts" / f"{sid}.parquet"
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

    def train_once(self) -> bool:
        """Train and publish one step if a batch is ready; True if it did."""
        from intellect.agents.grpo_trainer import Sample
        from intellect.sdk import TaskStatus

        plan = self.state.get("plan")
        if plan is not None and plan["step"] != self.gt.step + 1:
            plan = None
        if plan is not None and "stats" not in plan:  # a plan from before a restart: re-check on-chain
            for sid in plan["submissions"]:
                t = self.protocol.task(sid)
                if t.status != TaskStatus.SUBMITTED:
                    self.state.put("submission", sid, "excluded", {"chain_status": t.status.name.lower()})
                    plan = None
            if plan is None:
                self.state.set("plan", None)
        if plan is None:
            chosen = self._choose_batch()
            if chosen is None:
                return False
            plan = {"step": self.gt.step + 1, "submissions": chosen}
            self.state.set("plan", plan)
        from intellect.agents.rollouts import RolloutFileError
        from intellect.sdk import IpfsError

        files = []
        for sid in plan["submissions"]:
            try:
                files.append(self._load_rollouts(sid))
            except (IpfsError, RolloutFileError, AgentError) as exc:
                # attested but not retrievable (its worker went away) or not what was attested: leave it out
                rec = self.state.record("submission", sid)
                fails = int((rec or {}).get("data", {}).get("load_failures", 0)) + 1
                if fails < 3 and isinstance(exc, IpfsError):
                    log.warning("submission %d: rollout file not retrievable yet (%s), try %d", sid, exc, fails)
                    self.state.put("submission", sid, (rec or {}).get("status", "pending"), {"load_failures": fails})
                    return False
                log.warning("submission %d left out of step %d: %s", sid, plan["step"], exc)
                self.state.put("submission", sid, "unusable", {"error": str(exc)[:300]})
                self.state.set("plan", None)
                return False
        samples = [Sample.from_row(r) for rf in files for r in rf]
        self.doing = f"training step {plan['step']} on {len(samples)} rollouts"
        stats = self.gt.train_step(samples)
        plan["rollouts"] = len(samples)
        plan["stats"] = {"loss": stats.loss, "reward_mean": stats.reward_mean, "samples_trained": stats.samples,
                         "dropped_groups": stats.dropped_groups, "tokens": stats.tokens, "seconds": stats.seconds}
        self.state.set("plan", plan)
        self.metrics.set("train_loss", stats.loss)
        self.metrics.set("train_reward_mean", stats.reward_mean)
        self.count("steps_trained")
        self.doing = f"publishing step {plan['step']}"
        self._publish(self.gt.step)
        return True

    def loop(self) -> None:
        from intellect.sdk import EventStream

        stream = EventStream(self.protocol, ["WorkSubmitted"], cursor_store=StateCursorStore(self.state, "trainer"),
                             filters={"poolId": self.pool_id}, confirmations=self.cfg.chain.confirmations,
                             poll_interval=0.5)
        follower = threading.Thread(target=lambda: stream.run(self._record_submission, until=self.stop_event.is_set),
                                    name="events", daemon=True)
        follower.start()
        last_pull = 0.0
        while not self.stop_event.is_set():
            try:
                if time.monotonic() - last_pull > 5:
                    self.refresh_ipfs_peers()
                    self.pull_attestations()
                    last_pull = time.monotonic()
                if self.gt.step >= self.cfg.trainer.max_steps:
                    self.doing = f"done: {self.gt.step} steps; serving checkpoints"
                elif self.train_once():
                    continue
                else:
                    self.doing = f"waiting for attested rollouts for step {self.gt.step + 1}"
            except Exception as exc:
                self.metrics.inc("errors_total", kind=type(exc).__name__)
                log.exception("trainer step failed; retrying")
            self.wait(self.cfg.trainer.poll_interval)
        stream.stop()
        follower.join(timeout=5)

    def status(self) -> dict[str, Any]:
        doc = super().status()
        steps = [{"step": int(r["id"]), "status": r["status"], "checkpoint_cid": r["data"].get("checkpoint_cid"),
                  "submissions": r["data"].get("submissions", []), "rollouts": r["data"].get("rollouts", 0),
                  "mean_reward": (r["data"].get("stats") or {}).get("reward_mean"),
                  "loss": (r["data"].get("stats") or {}).get("loss")} for r in self.state.records("step")]
        steps.sort(key=lambda s: s["step"])
        att = self._attestation_sets()
        doc.update({
            "policy_step": self.gt.step if self.gt is not None else None,
            "max_steps": self.cfg.trainer.max_steps,
            "steps": steps,
            "consumed": sorted(int(r["id"]) for r in self.state.records("submission", "consumed")),
            "submissions": [{"submission_id": int(r["id"]), "status": r["status"], "node": r["data"].get("node"),
                             "policy_step": r["data"].get("policy_step"), "attestations": sorted(att.get(int(r["id"]), set())),
                             "step": r["data"].get("step")} for r in self.state.records("submission")],
            "quorum": self.cfg.trainer.attestation_quorum,
        })
        return doc
