"""Held-out evaluation beside training (issue 37): a thread of its own, with its own inference engine, so an
evaluation (minutes on CPU) never pauses a training step.

    ev = BackgroundEvaluator(lambda step: evaluate(step), on_result=record, name="eval")
    ev.submit(step)        # returns at once; the thread evaluates the newest step submitted
    ev.stop()

Steps submitted while an evaluation runs wait; when several wait, only the newest is evaluated (older
checkpoints may be pruned meanwhile, and the newest is the one worth knowing) unless `keep_all`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["BackgroundEvaluator"]

log = logging.getLogger(__name__)


class BackgroundEvaluator:
    """Runs `evaluate(step)` on a daemon thread for each step submitted; `on_result(step, result)` gets what it
    returned (not called for None). An exception is logged and counted, never raised into the submitter."""

    def __init__(self, evaluate: Callable[[int], Any], on_result: Callable[[int, Any], None] | None = None, *,
                 name: str = "evaluation", keep_all: bool = False) -> None:
        self._evaluate = evaluate
        self._on_result = on_result
        self.keep_all = keep_all
        self._pending: list[int] = []
        self._cv = threading.Condition()
        self._stopping = False
        self.running: int | None = None
        """the step being evaluated now (None when idle)"""
        self.done: list[int] = []
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, step: int) -> None:
        """Queue `step` for evaluation; returns at once."""
        with self._cv:
            if step not in self._pending and step != self.running:
                self._pending.append(step)
            self._cv.notify_all()

    @property
    def busy(self) -> bool:
        with self._cv:
            return self.running is not None or bool(self._pending)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until nothing is queued or running (True), or `timeout` passed (False)."""
        with self._cv:
            return self._cv.wait_for(lambda: self.running is None and not self._pending, timeout)

    def stop(self, timeout: float = 5.0) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._stopping or bool(self._pending))
                if self._stopping:
                    return
                if self.keep_all:
                    step = self._pending.pop(0)
                else:
                    step = max(self._pending)
                    skipped = [s for s in self._pending if s != step]
                    if skipped:
                        log.info("evaluation of step(s) %s skipped: step %d is newer", skipped, step)
                    self._pending.clear()
                self.running = step
            try:
                result = self._evaluate(step)
                if result is not None and self._on_result is not None:
                    self._on_result(step, result)
            except Exception as exc:  # an evaluation must never stop training
                self.failures += 1
                log.exception("evaluation of step %d failed: %s", step, exc)
            finally:
                with self._cv:
                    self.running = None
                    self.done.append(step)
                    self._cv.notify_all()
