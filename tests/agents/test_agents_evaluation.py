"""Held-out evaluation (pass@1 at temperature 0, mean reward) and `intellect-agent eval`; prompts in the
model's chat template when it has one (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from intellect.agents.cli import main
from intellect.agents.evaluation import evaluate_checkpoint, evaluate_engine
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


class _FixedEngine:
    """An engine whose greedy completions are given: `text` → completion token count."""

    tokenizer = None
    policy_step = 7

    def __init__(self, completions: dict[str, tuple[str, int]]) -> None:
        self.completions = completions

    def generate(self, prompts: list[str], params: object) -> list[SimpleNamespace]:
        out = []
        for prompt in prompts:
            text, n = next(v for k, v in self.completions.items() if k in prompt)
            out.append(SimpleNamespace(text=text, completion_ids=list(range(n))))
        return out


def test_evaluate_applies_the_pools_length_scope() -> None:
    """The trainer evaluates under the pool's `length_scope`: a wrong answer shorter than its target carries
    the length penalty under `all` (rules made before the field) and none under `solved`."""
    tasks = [Task(id="a", prompt="What is 2 + 3?", verifier=VerifierKind.MATH, answer="5"),
             Task(id="b", prompt="What is 4 + 4?", verifier=VerifierKind.MATH, answer="8")]
    engine = _FixedEngine({"2 + 3": ("The answer is \\boxed{5}", 4), "4 + 4": ("The answer is \\boxed{9}", 2)})
    solved = evaluate_engine(engine, tasks, max_tokens=8, length_alpha=0.1, chat_template=False)
    every = evaluate_engine(engine, tasks, max_tokens=8, length_alpha=0.1, length_scope="all", chat_template=False)
    assert solved.pass_at_1 == every.pass_at_1 == 0.5 and solved.step == 7
    assert abs(solved.mean_reward - (1 - 0.1 * 4) / 2) < 1e-9  # the wrong answer scores 0
    assert abs(every.mean_reward - ((1 - 0.1 * 4) + (0 - 0.1 * 6)) / 2) < 1e-9  # and −α·6 under `all`
    assert (solved.length_scope, every.length_scope) == ("solved", "all")


def test_trainer_evaluates_under_its_pools_length_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Trainer.maybe_evaluate` passes the pool's `length_scope` (`tasks.length_scope`, set from the rules)."""
    import intellect.agents.evaluation as evaluation
    from intellect.agents.roles.trainer import Trainer

    seen: dict[str, object] = {}

    def fake(model_dir: object, tasks: object, **kw: object) -> SimpleNamespace:
        seen.update(kw)
        return SimpleNamespace(pass_at_1=0.5, mean_reward=0.1, model_dump=dict)

    monkeypatch.setattr(evaluation, "evaluate_checkpoint", fake)
    cfg = SimpleNamespace(trainer=SimpleNamespace(eval_every=1),
                          tasks=SimpleNamespace(length_alpha=0.01, length_scope="all", budgets={"cpu": [8]}))
    me = SimpleNamespace(cfg=cfg, eval_tasks=[object()], _eval_engine=object(), rules=None,
                         gt=SimpleNamespace(checkpoint_path=str), state=SimpleNamespace(put=lambda *a: None),
                         metrics=SimpleNamespace(set=lambda *a: None), eval_max_tokens=lambda: 8)
    assert Trainer.maybe_evaluate(me, 3) is not None  # type: ignore[arg-type]
    assert (seen["length_alpha"], seen["length_scope"], seen["max_tokens"]) == (0.01, "all", 8)


def test_cli_eval_on_a_file(tiny_dir: Path, tmp_path: Path) -> None:
    path = synthetic_task_set(4, seed=1, max_operand=9, ops=("+",)).save(tmp_path / "held.jsonl")
    result = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--taskset", str(path), "--max-tokens", "4",
                                       "--length-scope", "all", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout.strip().splitlines()[-1])
    assert doc["tasks"] == 4 and doc["max_tokens"] == 4 and 0.0 <= doc["pass_at_1"] <= 1.0
    assert doc["length_scope"] == "all"
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
