"""Held-out evaluation (pass@1 at temperature 0, mean reward) and `intellect-agent eval`; prompts in the
model's chat template when it has one (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from intellect.agents.cli import main
from intellect.agents.evaluation import evaluate_checkpoint
from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.submission import prompt_text
from intellect.verifier.tasks import Task, VerifierKind


def test_evaluate_is_greedy_and_deterministic(tiny_dir: Path) -> None:
    tasks = list(synthetic_task_set(6, seed=3, max_operand=9, ops=("+",)))
    a = evaluate_checkpoint(tiny_dir, tasks, max_tokens=6, length_alpha=0.01)
    b = evaluate_checkpoint(tiny_dir, tasks, max_tokens=6, length_alpha=0.01)
    assert a.tasks == 6 and 0.0 <= a.pass_at_1 <= 1.0 and a.step is None
    assert (a.pass_at_1, a.mean_reward, a.mean_completion_tokens) == (b.pass_at_1, b.mean_reward,
                                                                       b.mean_completion_tokens)
    # mean reward = task reward minus α·|budget − length| of each solved greedy completion (an unsolved one
    # scores 0 at any length, issue 17): at most pass@1, and 0 when nothing is solved
    assert a.mean_reward <= a.pass_at_1 + 1e-9 and (a.pass_at_1 > 0 or a.mean_reward == 0.0)


def test_cli_eval_on_a_file(tiny_dir: Path, tmp_path: Path) -> None:
    path = synthetic_task_set(4, seed=1, max_operand=9, ops=("+",)).save(tmp_path / "held.jsonl")
    result = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--taskset", str(path), "--max-tokens", "4",
                                       "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["tasks"] == 4 and doc["max_tokens"] == 4 and 0.0 <= doc["pass_at_1"] <= 1.0
    bad = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--taskset", "bafkreinotacid",
                                    "--ipfs", f"embedded:{tmp_path / 'ipfs'}"])
    assert bad.exit_code == 2 and "no file" in bad.output


def test_prompt_text_applies_chat_template_only_when_the_model_has_one(tiny_dir: Path) -> None:
    from transformers import AutoTokenizer

    from intellect.agents.models import smollm2_dir

    task = Task(id="t", prompt="What is 2 + 3?", verifier=VerifierKind.MATH, answer="5")
    tiny = AutoTokenizer.from_pretrained(str(tiny_dir))
    assert prompt_text(task, 64, tokenizer=tiny) == prompt_text(task, 64)  # no template: the bare text
    smol = AutoTokenizer.from_pretrained(str(smollm2_dir()))
    text = prompt_text(task, 64, tokenizer=smol)
    assert text.startswith("<|im_start|>") and text.endswith("<|im_start|>assistant\n")
    assert prompt_text(task, 64) in text
    ids = smol(text, add_special_tokens=False)["input_ids"]
    assert ids.count(smol.convert_tokens_to_ids("<|im_start|>")) == 3  # system, user, assistant: real special tokens
