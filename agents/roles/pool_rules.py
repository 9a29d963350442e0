"""Agents take their pool's rules from the chain, not from their configuration.

    rules = apply_pool_rules(cfg, pool_cid, ipfs, pool_id)   # at start, before anything uses the settings

The pool's on-chain CID names an `intellect.poolrules/v1` document (`intellect.sdk.poolrules`). Its
fields overwrite the agent's settings (group size, problems per task, budgets, length α, temperature,
TOPLOC profile, the budget-class rule); a setting the operator set explicitly (YAML, environment, --set) to another value
stops the agent with an `AgentError` naming every such field, instead of letting a worker be
challenged and slashed for a configuration mismatch. A pool whose CID names a bare task set (pools
made before the rules existed) keeps the agent's own settings.

Every agent that read the pool's documents keeps them (issue 36: a pool must stay joinable when its trainer is
down): `apply_pool_rules` pins the rules document it fetched, `load_task_set` the task set, `pool_evidence_rules`
the evidence rules, so each node's gateway serves them to joiners; a relay, which reads none of them for its own
work, replicates all of them (`replicate_pool_documents`, within its fetch limit).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from intellect.agents.config import AgentConfig
from intellect.agents.roles._runtime import AgentError
from intellect.sdk import ContentTooLargeError, IntellectError
from intellect.sdk.ipfs import compute_cid
from intellect.sdk.poolrules import MAX_RULES_BYTES, PoolRules, conflicts
from intellect.verifier.evidence import MAX_RULES_BYTES as MAX_EVIDENCE_RULES_BYTES
from intellect.verifier.evidence import EvidenceRules, rules_for_profile

__all__ = [
    "PoolReplica",
    "apply_pool_rules",
    "explicit_rule_settings",
    "fetch_pool_rules",
    "keep",
    "pool_documents",
    "pool_evidence_rules",
    "replicate_pool_documents",
]

log = logging.getLogger(__name__)


def explicit_rule_settings(cfg: AgentConfig) -> dict[str, Any]:
    """Rule fields the operator set explicitly, by rules name (defaults are not included)."""
    out: dict[str, Any] = {}
    w, t, v = cfg.worker, cfg.tasks, cfg.validator
    for name in ("group_size", "problems_per_task"):
        if name in w.model_fields_set:
            out[name] = getattr(w, name)
    for name in ("budgets", "length_alpha", "length_scope", "problem_order", "temperature", "class_history",
                 "class_lease_share"):
        if name in t.model_fields_set:
            out[name] = getattr(t, name)
    if "temperature" in w.model_fields_set and "temperature" not in out:
        out["temperature"] = w.temperature
    if "toploc_profile" in v.model_fields_set:
        out["toploc_profile"] = v.toploc_profile
    return out


def keep(ipfs: Any, cid: str) -> bool:
    """Pin `cid` in `ipfs` (its blocks already local after a read: nothing is fetched), so this node's gateway
    keeps serving it; False (logged) when the store refuses."""
    try:
        ipfs.pin(cid)
    except IntellectError as exc:
        log.warning("could not keep %s in this node's store: %s", cid, exc)
        return False
    return True


def pool_documents(pool_cid: str | None, rules: PoolRules | None) -> list[str]:
    """The CIDs a pool names: its rules document (or bare task set), the rules' task set, held-out set and evidence
    rules."""
    named = [pool_cid] + ([rules.taskset_cid, rules.heldout_cid, rules.evidence_rules_cid] if rules else [])
    return list(dict.fromkeys(c for c in named if c and c != compute_cid(b"")))


def replicate_pool_documents(ipfs: Any, pool_cid: str | None, max_bytes: int) -> tuple[list[str], list[str]]:
    """Fetch (from peers, each within `max_bytes`, every block CID-checked) and pin every document the pool names
    (`pool_documents`); returns (kept, missing). One that cannot be fetched now is logged and left for the next
    call; nothing raises. A relay's replica: a joiner resolves the pool while its trainer is down."""
    try:
        rules = fetch_pool_rules(pool_cid, ipfs)
    except IntellectError as exc:
        log.info("pool rules %s not replicated yet: %s", pool_cid, exc)
        return [], [c for c in [pool_cid] if c]
    kept, missing = [], []
    for cid in pool_documents(pool_cid, rules):
        try:
            for _ in ipfs.cat_iter(cid, max_size=max_bytes):
                pass  # stored block by block as it comes
        except IntellectError as exc:
            log.info("pool document %s not replicated yet: %s", cid, exc)
            missing.append(cid)
            continue
        (kept if keep(ipfs, cid) else missing).append(cid)
    return kept, missing


class PoolReplica:
    """A relay's copy of its pool's documents (`replicate_pool_documents`): `tick` replicates every `retry_s` while
    one is missing, every `refresh_s` once all are kept (the pool's rules CID may change)."""

    def __init__(self, retry_s: float = 30.0, refresh_s: float = 600.0) -> None:
        self.retry_s, self.refresh_s = retry_s, refresh_s
        self.kept: list[str] = []
        self.missing: list[str] = []
        self._next = 0.0

    def tick(self, agent: Any) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        agent.refresh_ipfs_peers()
        self.kept, self.missing = replicate_pool_documents(agent.ipfs, agent.protocol.pool(agent.pool_id).params.rules_cid,
                                                           agent.cfg.ipfs.max_fetch_bytes)
        self._next = now + (self.retry_s if self.missing or not self.kept else self.refresh_s)
        if self.kept and not self.missing:
            log.info("pool %d documents kept and served here: %s", agent.pool_id, ", ".join(self.kept))


def fetch_pool_rules(pool_cid: str | None, ipfs: Any) -> Any:
    """The rules the pool's CID names, or None for a pool that names a bare task set (or nothing)."""
    if not pool_cid or pool_cid == compute_cid(b""):
        return None

    try:
        data = ipfs.cat(pool_cid, max_size=MAX_RULES_BYTES)
    except ContentTooLargeError:
        return None  # larger than any rules document: a task set
    if not PoolRules.is_rules_document(data):
        return None
    return PoolRules.from_bytes(data, source=pool_cid)


def apply_pool_rules(cfg: AgentConfig, pool_cid: str | None, ipfs: Any, pool_id: int) -> Any:
    """Fetch the pool's rules, refuse contradicting local settings, and write the rules into `cfg`.

    Returns the `PoolRules`, or None for a pool without rules. Raises `AgentError` naming each field a
    local setting contradicts.
    """
    rules = fetch_pool_rules(pool_cid, ipfs)
    if rules is None:
        log.warning("pool %d names no rules document (CID %s): using this agent's own settings", pool_id, pool_cid)
        return None
    keep(ipfs, str(pool_cid))  # fetched: served to joiners from here on
    problems = conflicts(rules, explicit_rule_settings(cfg))
    if problems:
        raise AgentError(f"local settings contradict pool {pool_id}'s rules ({pool_cid}): " + "; ".join(problems)
                         + ". Remove them from the configuration (the agent takes the pool's rules) or join "
                           "another pool")
    cfg.worker.group_size = rules.group_size
    cfg.worker.problems_per_task = rules.problems_per_task
    cfg.worker.temperature = rules.sampler.temperature
    cfg.tasks.budgets = {k: list(v) for k, v in rules.budgets.items()}
    cfg.tasks.length_alpha = rules.length_alpha
    cfg.tasks.length_scope = rules.length_scope
    cfg.tasks.problem_order = rules.problem_order
    cfg.tasks.class_history = rules.class_history
    cfg.tasks.class_lease_share = rules.class_lease_share
    cfg.tasks.temperature = rules.sampler.temperature
    cfg.validator.toploc_profile = rules.toploc_profile
    log.info("pool %d rules %s: task set %s (%s order), group %d x %d problems, budgets %s, alpha %g (%s), T %g, "
             "TOPLOC %s, chat template %s", pool_id, pool_cid, rules.taskset_cid, rules.problem_order,
             rules.group_size, rules.problems_per_task, rules.budgets, rules.length_alpha, rules.length_scope,
             rules.sampler.temperature, rules.toploc_profile, rules.model.chat_template)
    return rules


def pool_evidence_rules(rules: PoolRules | None, ipfs: Any, profile: str) -> EvidenceRules:
    """The evidence rules a validator judges the pool's workers by: the document the pool's rules name
    (`evidence_rules_cid`: calibrated on the pool's model), else the rules shipped for `profile`. A named document
    that cannot be fetched or read stops the agent with an `AgentError` naming it (judging by other rules than
    the pool's would flag or clear workers the other validators do not)."""
    cid = rules.evidence_rules_cid if rules is not None else None
    if cid is None:
        return rules_for_profile(profile)
    source = f"the pool's evidence rules {cid}"
    try:
        data = ipfs.cat(cid, max_size=MAX_EVIDENCE_RULES_BYTES)
        ev = EvidenceRules.from_bytes(data, source=source)
        keep(ipfs, cid)
    except IntellectError as exc:
        raise AgentError(f"cannot use {source}: {exc}") from None
    log.info("evidence rules from the pool: %s (digest %s, classes %s, h = %.1f)", cid, ev.digest(),
             ", ".join(ev.classes()), ev.threshold)
    return ev


def rules_tokenizer(rules: Any, tokenizer: Any) -> Any:
    """The tokenizer whose chat template prompts use under `rules` (None: bare text)."""
    if rules is None or rules.model.chat_template == "none":
        return None
    return tokenizer


__all__ += ["rules_tokenizer"]
