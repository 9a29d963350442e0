"""A worker's rollout files that the pool's store did not take, pushed again until it does (issue 36).

A worker pushes each rollout file to where the pool keeps work (`worker.push_to`: the trainer's `/store` or a
Kubo node) so validators need not reach the worker. A push can fail: the trainer restarting, its per-worker rate
or quota, a network blip. The submission goes on, since the worker's own gateway still serves the file, but a worker
behind NAT has no gateway anyone reaches, and any worker may go down: a file nobody else holds is then fetched by
no validator and the submission is challenged as `unavailable` when its window nears its end. So a failed push is
kept in the worker's state store (kind `push`, id the CID) and tried again from the worker's loop, RETRY_FIRST_S
later and doubling up to RETRY_MAX_S, while its file exists and its task is still claimed, submitted or
challenged within its window; a restart resumes them. It is forgotten once stored, after MAX_ATTEMPTS, or when the
task no longer needs it or the trainer's store refuses it for good (a 4xx other than its rate). At most MAX_PENDING are kept (the oldest dropped first) and one pass makes at most
PER_PASS pushes, stopping at the first failure (the store is likely still refusing)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from intellect.sdk import TaskStatus

from .store import StoreRefused, push_file

log = logging.getLogger(__name__)

KIND = "push"
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 600.0
MAX_ATTEMPTS = 12
MAX_PENDING = 256
PER_PASS = 4
_NEEDED = (TaskStatus.CLAIMED, TaskStatus.SUBMITTED, TaskStatus.CHALLENGED)


def retry_in(attempts: int) -> float:
    """Seconds before try `attempts + 1` of a push that failed `attempts` times."""
    return min(RETRY_FIRST_S * 2 ** (attempts - 1), RETRY_MAX_S)


def push_or_keep(agent: Any, task_id: int, cid: str, path: Path) -> str | None:
    """Push the rollout file `path` (CID `cid`) of task `task_id` where `worker.push_to` says; returns where it is
    stored (None for `push_to: none`). A failure is logged and kept for `retry_pushes`, never raised."""
    try:
        where = push_file(agent, path, cid, task_id)
    except Exception as exc:  # the trainer down or refusing, a Kubo node unreachable
        agent.metrics.inc("errors_total", kind="push")
        log.warning("task %d: pushing %s to %s failed: %s; tried again in %.0f s", task_id, cid,
                    agent.cfg.worker.push_to, exc, retry_in(1))
        _keep(agent.state, task_id, cid, path, 1, exc)
        return None
    agent.state.delete(KIND, cid)
    return where


def _keep(state: Any, task_id: int, cid: str, path: Path, attempts: int, exc: BaseException) -> None:
    state.put(KIND, cid, "pending", {"task_id": task_id, "path": str(path), "attempts": attempts,
                                     "retry_at": time.time() + retry_in(attempts), "error": str(exc)[:300]})
    pending = state.records(KIND, "pending")
    for old in sorted(pending, key=lambda r: r["updated_at"])[:max(0, len(pending) - MAX_PENDING)]:
        log.warning("task %s: giving up pushing %s: more than %d pushes waiting", old["data"]["task_id"], old["id"],
                    MAX_PENDING)
        state.delete(KIND, old["id"])


def _needed(agent: Any, task_id: int) -> str | None:
    """Why the file of task `task_id` is no longer worth pushing, or None while it is."""
    task = agent.protocol.known_task(task_id)
    if task is None:
        return "the ledger does not know the task"
    if task.status not in _NEEDED:
        return f"the task is {task.status.name}"
    if task.window_end and task.window_end <= agent.protocol.chain_time():
        return "its window has ended"
    return None


def retry_pushes(agent: Any, now: float | None = None) -> int:
    """Try again the kept pushes that are due (PER_PASS at most, stopping at the first failure); returns how many
    were stored. Called from the worker's loop: cheap when none is due (one read of the state store)."""
    now = time.time() if now is None else now
    due = sorted((r for r in agent.state.records(KIND, "pending") if r["data"]["retry_at"] <= now),
                 key=lambda r: r["data"]["retry_at"])
    stored = 0
    for rec in due[:PER_PASS]:
        cid, d = rec["id"], rec["data"]
        path, task_id, attempts = Path(d["path"]), int(d["task_id"]), int(d["attempts"]) + 1
        why_not = "its file is gone" if not path.is_file() else _needed(agent, task_id)
        if why_not is not None:
            log.info("task %d: not pushing %s again: %s", task_id, cid, why_not)
            agent.state.delete(KIND, cid)
            continue
        try:
            where = push_file(agent, path, cid, task_id)
        except Exception as exc:
            if isinstance(exc, StoreRefused) and exc.final:
                log.warning("task %d: the store refuses %s for good: %s", task_id, cid, exc)
                agent.state.delete(KIND, cid)
                continue
            if attempts >= MAX_ATTEMPTS:
                log.warning("task %d: giving up pushing %s after %d tries: %s", task_id, cid, attempts, exc)
                agent.state.delete(KIND, cid)
            else:
                log.warning("task %d: pushing %s failed again (try %d): %s; next in %.0f s", task_id, cid, attempts,
                            exc, retry_in(attempts))
                _keep(agent.state, task_id, cid, path, attempts, exc)
            break
        agent.state.delete(KIND, cid)
        agent.count("pushes_retried")
        stored += 1
        log.info("task %d: %s stored at %s on try %d", task_id, cid, where, attempts)
    return stored
