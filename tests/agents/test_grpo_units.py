"""Trainer-level checks of the recipe: online filtering leaves the update unchanged, thinking-budget
rewards end up in the rollout rows, the old log-probs are the trainer's own."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from intellect.agents.demo.learn import make_rollouts
from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.submission import prompt_text


def _group(trainer: GRPOTrainer, pid: str, question: str, outs: list[str], advs: list[float]) -> list[Sample]:
    tok = trainer.tokenizer
    prompt = tok(question, add_special_tokens=False)["input_ids"]
    return [Sample(pid, prompt, tok(o, add_special_tokens=False)["input_ids"] + [tok.eos_token_id], a, 0)
            for o, a in zip(outs, advs, strict=True)]


def _weights_after(tiny_dir: Path, out: Path, samples_of, **cfg) -> dict[str, torch.Tensor]:
    trainer = GRPOTrainer(tiny_dir, out, GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8, **cfg))
    stats = trainer.train_step(samples_of(trainer))
    return {"dropped": torch.tensor(stats.dropped_groups),
            **{k: v.detach().clone() for k, v in trainer.model.state_dict().items()}}


def test_train_step_flat_group_leaves_update_unchanged(tiny_dir: Path, tmp_path: Path) -> None:
    def signal(t: GRPOTrainer) -> list[Sample]:
        return _group(t, "p1", "What is 2 + 3?", [" 5", " 6", " 4"], [1.1547, -0.5774, -0.5774])

    def with_flat(t: GRPOTrainer) -> list[Sample]:  # every completion of p0 earned the same reward
        return _group(t, "p0", "What is 1 + 1?", [" 2", " 2", " 2"], [0.0, 0.0, 0.0]) + signal(t)

    base = _weights_after(tiny_dir, tmp_path / "a", signal)
    filtered = _weights_after(tiny_dir, tmp_path / "b", with_flat)
    unfiltered = _weights_after(tiny_dir, tmp_path / "c", with_flat, filter_zero_advantage=False)
    assert int(filtered["dropped"]) == 1 and int(unfiltered["dropped"]) == 0
    names = [k for k in base if k != "dropped"]
    # dropped before the step: neither its tokens nor its share of the constant denominator count
    assert all(torch.allclose(base[k], filtered[k], atol=1e-7) for k in names)
    # kept, the flat group dilutes the loss (denominator 6 × 8 instead of 3 × 8): another update
    assert any(not torch.allclose(base[k], unfiltered[k], atol=1e-7) for k in names)


def test_train_step_old_logprobs_are_the_trainers(tiny_dir: Path, tmp_path: Path) -> None:
    """One optimizer step on the whole batch starts on-policy: ratio 1, no clipping, KL 0."""
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8))
    samples = _group(trainer, "p1", "What is 2 + 3?", [" 5", " 6", " 4"], [1.1547, -0.5774, -0.5774])
    stats = trainer.train_step(samples)
    assert stats.approx_kl == pytest.approx(0.0, abs=1e-7) and stats.clip_fraction == 0.0
    # a second mini-batch is trained after the first moved the weights: off-policy by then
    trainer2 = GRPOTrainer(tiny_dir, tmp_path / "ckpt2", GRPOConfig(lr=1e-1, optimizer_steps=3, max_completion_tokens=8))
    stats2 = trainer2.train_step(_group(trainer2, "p1", "What is 2 + 3?", [" 5", " 6", " 4"],
                                        [1.1547, -0.5774, -0.5774]))
    assert stats2.approx_kl > 0.0


def test_make_rollouts_thinking_budget_rewards(tiny_dir: Path) -> None:
    engine = TransformersEngine(tiny_dir)
    tasks = list(synthetic_task_set(2, seed=4, max_operand=9, ops=("+",)))
    rf = make_rollouts(engine, tasks, SamplingParams(max_tokens=6, temperature=1.0, capture_proofs=False),
                       group_size=3, policy_step=0, task_id="budget", seed=9, target_lengths=(4, 16),
                       length_alpha=0.05)
    assert len(rf) == 6 and rf.meta.length_alpha == 0.05
    tok = engine.tokenizer
    for row in rf:
        assert row.target_length in (4, 16)
        task = next(t for t in tasks if t.id == row.problem_id)
        # the prompt carried the budget suffix the reward was computed against
        assert row.prompt_ids == tok(prompt_text(task, row.target_length), add_special_tokens=False)["input_ids"]
        # the length term applies to solved answers only (issue 17): an unsolved one scores 0 at any length
        want = 0.05 * abs(row.target_length - len(row.completion_ids)) if row.task_reward > 0 else 0.0
        assert row.length_penalty == pytest.approx(want)
        assert row.reward == pytest.approx(row.task_reward - row.length_penalty)
    # advantages are normalised over the total reward within each group
    for pid in {r.problem_id for r in rf}:
        group = [r for r in rf if r.problem_id == pid]
        assert sum(r.advantage for r in group) == pytest.approx(0.0, abs=1e-5)


def test_equations_default_formats_never_use_the_question_format() -> None:
    """The learning run's warm-start knowledge: every pair in each phrasing, none of them the
    held-out question format `What is a + b?` (held-out questions stay unseen in that format)."""
    from intellect.agents.demo.learn import LearnConfig, _equations

    cfg = LearnConfig()
    table = _equations(cfg, cfg.knowledge_formats)
    pairs = (cfg.max_operand + 1) ** 2
    assert len(table) == len(cfg.knowledge_formats) * pairs and len(cfg.knowledge_formats) >= 2
    assert ("The sum of 3 and 4 is", "7") in table and ("3 + 4 equals", "7") in table
    questions = {t.prompt for t in synthetic_task_set(pairs, seed=0, max_operand=cfg.max_operand, ops=cfg.ops)}
    assert len(questions) == pairs  # every question of the range ...
    assert not questions & {p for p, _ in table}  # ... and none is a knowledge prompt
    assert all("What is" not in p and "?" not in p for p, _ in table)


def test_signal_groups_counts_what_train_step_keeps() -> None:
    """The trainer role refills a batch until `signal_groups` reaches `batch_groups`: it must count exactly the
    groups `train_step`'s zero-advantage filter keeps (keyed by problem and policy step)."""
    from intellect.agents.grpo_trainer import group_samples, signal_groups

    def s(pid: str, adv: float, step: int = 0, source: str = "") -> Sample:
        return Sample(pid, [1], [2], adv, step, source=source)

    batch = [s("a", 0.0), s("a", 0.0), s("b", 1.0), s("b", -1.0), s("a", 0.0, step=1), s("a", 0.5, step=1)]
    assert list(group_samples(batch)) == [("a", 0, ""), ("b", 0, ""), ("a", 1, "")]
    assert signal_groups(batch) == 2  # a@0 is flat; a@1 is its own group
    assert signal_groups(batch, filter_zero_advantage=False) == 3
    assert signal_groups([]) == 0
    # the same problem at the same policy step from two submissions: two groups, each judged alone
    two = [s("a", 0.0, source="t1"), s("a", 0.0, source="t1"), s("a", 1.0, source="t2"), s("a", -1.0, source="t2")]
    assert signal_groups(two) == 1 and signal_groups(two, filter_zero_advantage=False) == 2


def test_train_step_drops_a_flat_group_beside_a_same_problem_group_of_another_submission(
        tiny_dir: Path, tmp_path: Path) -> None:
    """Two submissions of one problem at one policy step: the flat one is dropped, as if the other were absent
    (merged by problem and step, it would ride along with zero advantages and dilute the denominator)."""
    from dataclasses import replace

    def signal(t: GRPOTrainer) -> list[Sample]:
        return [replace(x, source="t2") for x in _group(t, "p1", "What is 2 + 3?", [" 5", " 6", " 4"],
                                                        [1.1547, -0.5774, -0.5774])]

    def with_flat(t: GRPOTrainer) -> list[Sample]:
        flat = _group(t, "p1", "What is 2 + 3?", [" 6", " 6", " 6"], [0.0, 0.0, 0.0])
        return [replace(x, source="t1") for x in flat] + signal(t)

    base = _weights_after(tiny_dir, tmp_path / "a", signal)
    both = _weights_after(tiny_dir, tmp_path / "b", with_flat)
    assert int(both["dropped"]) == 1
    for k in base:
        if k != "dropped":
            torch.testing.assert_close(both[k], base[k])
