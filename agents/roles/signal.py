"""Why a trainer's step has no learning signal, and what to change (issue 37: never stall silently).

A GRPO group teaches something only when its rewards differ: all-unsolved and all-solved groups (with no
length term to separate them) are dropped by the zero-advantage filter. When the attested rollouts a trainer
has seen carry no such group for a while, `no_signal_report` says so from what it saw (solve rate, groups
never solved and always solved) and what would give signal. With solve rate p and group size G a group has
signal with probability 1 − p^G − (1 − p)^G; the report shows it for the pool's G and for its neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from intellect.agents.grpo_trainer import group_samples

__all__ = ["NO_SIGNAL_AFTER_S", "NoSignalReport", "no_signal_report", "signal_chance"]

NO_SIGNAL_AFTER_S = 60.0
"""Seconds a step may wait on attested rollouts without a group with signal before the trainer says so."""


class NoSignalReport(BaseModel):
    """What a trainer saw for a step that has no group with signal (shown in its /status as `no_signal`)."""

    step: int
    waited_s: float
    submissions: int
    samples: int
    groups: int
    solve_rate: float
    """Share of the samples rewarded (reward > 0: solved, under any length term)."""
    groups_never_solved: int
    groups_always_solved: int
    group_size: int
    signal_chance: float
    """1 − p^G − (1 − p)^G at the observed solve rate p and the pool's group size G."""
    message: str


def signal_chance(p: float, group_size: int) -> float:
    """Probability that a group of `group_size` completions solved with probability `p` each has signal."""
    return max(0.0, 1.0 - p**group_size - (1.0 - p) ** group_size)


def no_signal_report(samples: Sequence[Any], *, step: int, submissions: int, waited_s: float, group_size: int,
                     length_alpha: float, batch_groups: int) -> NoSignalReport:
    """The report for `samples` (the step's attested rollouts, `grpo_trainer.Sample`s, none in a group with
    signal) after `waited_s` seconds, with the advice its numbers call for."""
    groups = list(group_samples(samples).values())
    solved = sum(1 for s in samples if s.reward > 0)
    p = solved / len(samples) if samples else 0.0
    never = sum(1 for g in groups if all(s.reward <= 0 for s in g))
    always = sum(1 for g in groups if all(s.reward > 0 for s in g))
    g = max(2, group_size)
    chance = signal_chance(p, g)
    head = (f"step {step}: no group with learning signal for {waited_s:.0f} s: {submissions} attested submission(s), "
            f"{len(groups)} groups of {g}, solve rate {p:.1%} ({never} groups never solved, {always} always solved); "
            f"at this rate a group of {g} has signal with probability {chance:.1%} "
            f"({signal_chance(p, 2 * g):.1%} with {2 * g}, {signal_chance(p, max(2, g // 2)):.1%} with {max(2, g // 2)})")
    if never >= always:
        advice = ("the problems are too hard for this model: give the pool an easier task set (`intellect taskset "
                  "filter --low 0.1 --high 0.8` keeps the band the model solves sometimes, docs/tasksets.md), a "
                  "pool with `--problem-order adaptive` (online difficulty filtering: problems that keep coming back "
                  "flat are drawn less), or a larger group (more tries per problem)")
    else:
        advice = ("the problems are too easy: a harder filter band (raise `--low`), or a length term "
                  "(length_alpha > 0 ranks solved answers by length, so solved groups carry signal)"
                  if length_alpha == 0 else
                  "the problems are too easy and the length term does not separate the answers: a harder filter "
                  "band (raise `--low`) or a larger length_alpha")
    message = f"{head}; {advice}; the trainer needs {batch_groups} groups with signal per step"
    return NoSignalReport(step=step, waited_s=round(waited_s, 1), submissions=submissions, samples=len(samples),
                          groups=len(groups), solve_rate=round(p, 4), groups_never_solved=never,
                          groups_always_solved=always, group_size=g, signal_chance=round(chance, 4), message=message)
