"""The acceptance rule's pure parts pinned exactly (issue 39, mutmut's survivors on `verifier/submission.py`).

Each test pins one rule a mutant changed and no other test noticed: the declared hardware classes that count as
no GPU, GRPO's per-group normalisation (each group by its own mean; ε keeps a near-flat group small; float64
whatever the rewards' dtype) and its errors, the chat template applied exactly when the tokenizer has one, a
group whose texts and lengths disagree refused, advantages from float64 totals, and how a `Rejection` reads.
docs/benchmarks-security.md ("mutmut") lists the mutants.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
import torch

from intellect.verifier.submission import (
    ADV_EPS,
    Rejection,
    RejectReason,
    group_advantages,
    hardware_class,
    prompt_text,
    score_group,
)
from intellect.verifier.tasks import Task, VerifierKind

TASK = Task(id="t", prompt="What is 2 + 3?", verifier=VerifierKind.MATH, answer="5")


@pytest.mark.parametrize(("gpu", "vram", "count"), [("", 24, 1), ("CPU", 80, 1), ("  cpu ", 80, 2), ("None", 48, 1)])
def test_hardware_class_a_gpu_model_of_cpu_none_or_empty_is_cpu_whatever_its_count(gpu: str, vram: int,
                                                                                   count: int) -> None:
    """A node that declares no GPU model (empty, `cpu`, `none`, any case and spacing) gets the cpu budgets even
    with a GPU count and VRAM set."""
    assert hardware_class(gpu, vram, count) == "cpu"
    assert hardware_class("RTX 4090", vram, count) != "cpu"  # the same numbers with a GPU model


def test_group_advantages_normalise_each_group_by_its_own_mean() -> None:
    """Two groups of different means (0.25 and 0.75, both of sample std 0.5): each is centred on its own mean,
    never on the batch's (0.5, which would move every advantage by ±0.5)."""
    adv = group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]]))
    d = 0.5 + ADV_EPS
    want = torch.tensor([[0.75 / d, -0.25 / d, -0.25 / d, -0.25 / d], [0.25 / d, 0.25 / d, 0.25 / d, -0.75 / d]])
    assert torch.allclose(adv, want, atol=1e-6), adv


def test_group_advantages_eps_keeps_a_near_flat_group_small() -> None:
    """Rewards 0 and 1e-6 (sample std 7.07e-7): (r − mean) / (std + ε) with ε = 1e-6 gives ±0.293, not the ±0.707
    of a plain z-score (nor a sign flip): float noise in a flat group does not become a full-size advantage."""
    assert ADV_EPS == 1e-6
    adv = group_advantages(torch.tensor([[0.0, 1e-6]], dtype=torch.float64))[0]
    want = 0.5e-6 / (math.sqrt(0.5e-12) + 1e-6)
    assert adv.tolist() == pytest.approx([-want, want], rel=1e-5)
    assert 0.29 < want < 0.3


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64])
def test_group_advantages_computed_in_float64_whatever_the_reward_dtype(dtype: torch.dtype) -> None:
    """bf16 or integer (0/1) rewards give the advantages of the same values in float64 (bf16 arithmetic would round
    the mean and std to 3 digits; an integer tensor has no mean at all)."""
    raw = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0], [0.1, 0.2, 0.3, 0.7, 0.9]])
    rewards = raw.to(dtype)
    got = group_advantages(rewards)
    assert got.dtype == torch.float32
    assert torch.equal(got, group_advantages(rewards.to(torch.float64)))


def test_group_advantages_errors_name_the_shape_and_the_group_size() -> None:
    with pytest.raises(ValueError, match=re.escape("rewards must be (groups, n), got shape (4,)")):
        group_advantages(torch.zeros(4))
    with pytest.raises(ValueError, match=r"^a GRPO group needs at least 2 completions$"):
        group_advantages(torch.zeros(3, 1))


@pytest.fixture(scope="module")
def tiny_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from intellect.agents.models import tiny_model_dir

    return AutoTokenizer.from_pretrained(str(tiny_model_dir()))


TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</{{ m['role'] }}>{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def test_prompt_text_is_the_chat_template_exactly_when_the_tokenizer_has_one(tiny_tokenizer: Any) -> None:
    """With a template: the task text (and its budget suffix) as the single user turn, the assistant turn opened.
    Without one (the tiny model's tokenizer, or a raw `tokenizers.Tokenizer` with no such attribute) or without a
    tokenizer: the bare text."""
    from tokenizers import Tokenizer

    from intellect.agents.models import tiny_model_dir

    bare = prompt_text(TASK, 64)
    assert bare.startswith(TASK.prompt) and bare != TASK.prompt  # the budget suffix
    assert tiny_tokenizer.chat_template is None
    assert prompt_text(TASK, 64, tokenizer=tiny_tokenizer) == bare
    raw = Tokenizer.from_file(str(tiny_model_dir() / "tokenizer.json"))
    assert not hasattr(raw, "chat_template") and prompt_text(TASK, 64, tokenizer=raw) == bare
    templated = type(tiny_tokenizer).from_pretrained(str(tiny_model_dir()))
    templated.chat_template = TEMPLATE
    assert prompt_text(TASK, 64, tokenizer=templated) == f"<user>{bare}</user><assistant>"
    assert prompt_text(TASK, tokenizer=templated) == f"<user>{TASK.prompt}</user><assistant>"


def test_score_group_refuses_texts_and_lengths_of_different_counts() -> None:
    """A group's completions and their token counts go together: one missing is an error, never a shorter group."""
    with pytest.raises(ValueError):
        score_group(TASK, [" 5", " 5", " 4"], [3, 3], 8, 0.01)
    with pytest.raises(ValueError):
        score_group(TASK, [" 5", " 4"], [3, 3, 3], 8, 0.01)


def test_score_group_advantages_come_from_float64_totals() -> None:
    """Two solved answers whose totals differ by 1e-9 (α = 1e-9, lengths 9 and 10 of target 10): one float32 at 1.0,
    but the advantages are those of the float64 totals (±5e-4, above REWARD_TOL), the shorter one below."""
    scored = score_group(TASK, [" 5", " 5"], [9, 10], 10, 1e-9)
    totals = [total for _, _, total, _ in scored]
    assert totals == [1.0 - 1e-9, 1.0]
    adv = [a for *_, a in scored]
    want = group_advantages(torch.tensor([totals], dtype=torch.float64))[0].tolist()
    assert adv == want and adv[0] < -1e-4 and adv[1] > 1e-4


def test_a_rejection_reads_as_its_reason_and_detail() -> None:
    """Its message is `reason: detail` (what a traceback or log line shows), its fields kept as given."""
    rej = Rejection(RejectReason.WRONG_SEED, "file seed 0x01 != claim seed 0x02")
    assert str(rej) == "wrong_seed: file seed 0x01 != claim seed 0x02"
    assert (rej.reason, rej.detail, rej.stats) == ("wrong_seed", "file seed 0x01 != claim seed 0x02", {})
    assert Rejection(RejectReason.BAD_FILE, "x", {"row": 1}).stats == {"row": 1}
