"""The trainer believes no number a worker wrote (issue 22): advantages recomputed from verified
rewards, non-finite or out-of-range values refused, a step that would leave NaN weights never saved."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from intellect.agents.grpo import MAX_ABS_ADVANTAGE, UntrustedValueError, check_reward, recompute_advantages
from intellect.agents.grpo_trainer import (
    GRPOConfig,
    GRPOTrainer,
    NonFiniteWeightsError,
    NoSignalError,
    Sample,
)


def _group(trainer: GRPOTrainer, advs: list[float]) -> list[Sample]:
    tok = trainer.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    return [Sample("p1", prompt, tok(o, add_special_tokens=False)["input_ids"] + [tok.eos_token_id], a, 0)
            for o, a in zip([" 5", " 6", " 4"], advs, strict=True)]


def _all_finite(path: Path) -> bool:
    return all(bool(torch.isfinite(t).all()) for f in path.glob("*.safetensors") for t in load_file(str(f)).values())


def test_recompute_advantages_from_rewards_only():
    adv = recompute_advantages([1.0, 0.0, 0.0])
    assert adv == pytest.approx([1.1547, -0.5774, -0.5774], abs=1e-3)
    assert max(map(abs, recompute_advantages([1.0] + [0.0] * 255))) <= MAX_ABS_ADVANTAGE


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 3e38, 1.5, -7.0])
def test_recompute_advantages_refuses_non_finite_or_out_of_range_reward(bad):
    with pytest.raises(UntrustedValueError, match="reward"):
        recompute_advantages([1.0, bad, 0.0])
    with pytest.raises(UntrustedValueError):
        check_reward(bad)


def test_train_step_refuses_huge_advantage(tiny_dir: Path, tmp_path: Path) -> None:
    """One row with advantage 3e38 (finite) made 5e47eb6's next step NaN in every weight."""
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8))
    with pytest.raises(UntrustedValueError, match="advantage"):
        trainer.train_step(_group(trainer, [3e38, -0.5774, -0.5774]))
    assert trainer.step == 0 and not (tmp_path / "ckpt" / "step-1").exists()


def test_train_step_skips_non_finite_gradient_and_saves_finite_weights(tiny_dir: Path, tmp_path: Path) -> None:
    """With the advantage bound lifted, the recipe's own guard: an infinite gradient norm skips the
    optimizer step (clipping it would multiply by 0 and write NaN); the checkpoint stays finite."""
    cfg = GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8, max_abs_advantage=math.inf)
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", cfg)
    with pytest.raises(NoSignalError, match="updates skipped"):  # and no checkpoint identical to step 0
        trainer.train_step(_group(trainer, [3e38, -3e38, -3e38]))
    assert trainer.step == 0 and not (tmp_path / "ckpt" / "step-1").exists()
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())


def test_train_step_never_saves_non_finite_weights(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, optimizer_steps=1, max_completion_tokens=8))
    trainer.save_checkpoint()
    samples = _group(trainer, [1.1547, -0.5774, -0.5774])
    with torch.no_grad():  # whatever made it so (a kernel bug, a poisoned optimizer state)
        next(trainer.model.parameters()).view(-1)[0] = float("nan")
    with pytest.raises(NonFiniteWeightsError, match="no checkpoint written"):
        # the NaN reaches the loss: the gradient step is skipped, the weight check refuses the save
        trainer.train_step(samples)
    assert trainer.step == 0 and not (tmp_path / "ckpt" / "step-1").exists()
    assert all(bool(torch.isfinite(p).all()) for p in trainer.model.parameters())  # restored from step-0
    trainer.train_step(samples)  # and training goes on from there
    assert _all_finite(tmp_path / "ckpt" / "step-1")
