"""Checks in flight, recorded durably, so that an input that ends the agent's process is not checked forever.

A check of a stranger's submission runs parsers and models on the stranger's bytes. If one of them ends the
process (a C library aborting, a segfault, the kernel's OOM killer), the submission is still queued when the
agent restarts, and a naive agent checks it again and dies again: one submission stops the node for good.
So the agent writes "check of `sid` running" to its state store (SQLite, committed) before the check and
"done" after it; on start, a check still marked running is one that ended the process: it is counted
(`recover`), and the agent gives the submission up after a few such ends (the validator: `MAX_CHECK_CRASHES`).
A suspect (one that ended the process before) is checked alone, so that a second end is its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from intellect.agents.roles._state import StateStore

__all__ = ["InFlightChecks"]


class InFlightChecks:
    """Records of kind `check` in a `StateStore`: status `running`, `done` or `crashed` (data: `crashes`)."""

    KIND = "check"

    def __init__(self, state: StateStore) -> None:
        self.state = state

    @contextmanager
    def running(self, sid: int) -> Iterator[None]:
        """Mark the check of `sid` running (committed) for the duration of the block; a Python exception ends
        the check normally (the process survived it)."""
        self.state.put(self.KIND, sid, "running", {"since": time.time()})
        try:
            yield
        finally:
            self.state.put(self.KIND, sid, "done")

    def recover(self) -> list[tuple[int, int]]:
        """At start: every check still marked running ended the last process. Each gets one more crash
        counted; returns (submission id, crashes so far) for each."""
        out = []
        for r in self.state.records(self.KIND, "running"):
            crashes = int(r["data"].get("crashes", 0)) + 1
            self.state.put(self.KIND, r["id"], "crashed", {"crashes": crashes})
            out.append((int(r["id"]), crashes))
        return out

    def suspects(self) -> set[int]:
        """Submissions whose last check ended the process and that were not checked to the end since."""
        return {int(r["id"]) for r in self.state.records(self.KIND, "crashed")}

    def crashes(self, sid: int) -> int:
        rec = self.state.record(self.KIND, sid)
        return int(rec["data"].get("crashes", 0)) if rec else 0
