"""Held-out evaluation (pass@1 at temperature 0, mean reward) and `intellect-agent eval`; prompts in the
model's chat template when it has one (issue 17)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner

from intellect.agents.cli import main
from intellect.agents.evaluation import evaluate_checkpoint, evaluate_engine
from intellect.agents.tasks import synthetic_task_set
from intellect.sdk.poolrules import PoolRules
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


def test_trainer_evaluates_under_its_pools_length_scope(tiny_dir: Path, tmp_path: Path) -> None:
    """The trainer's evaluation (`held_out.evaluate_and_record`) runs under the pool's length rule (`tasks`:
    `length_alpha`, `length_scope`, the largest CPU budget) and records the result with the rules' CID: a real
    checkpoint on a real engine, a real state store and metrics."""
    from intellect.agents.config import TaskSettings
    from intellect.agents.engines import TransformersEngine
    from intellect.agents.roles._server import Metrics
    from intellect.agents.roles._state import StateStore
    from intellect.agents.roles.held_out import evaluate_and_record

    tasks = list(synthetic_task_set(2, seed=1, max_operand=9, ops=("+",)))
    settings = TaskSettings(length_alpha=0.01, length_scope="all", budgets={"cpu": [4, 6], "gpu-large": [16]})
    state, metrics = StateStore(tmp_path / "state.sqlite"), Metrics()
    for name in ("eval_pass_at_1", "eval_mean_reward", "eval_step"):
        metrics.declare(name, "gauge", name)
    metrics.declare("errors_total", "counter", "errors by kind")  # as the agent runtime declares them
    try:
        got = evaluate_and_record(3, tiny_dir, tasks, settings, engine=TransformersEngine(), chat_template=False,
                                  rules_cid="bafkreirules", state=state, metrics=metrics)
        assert got is not None
        assert (got.length_alpha, got.length_scope, got.max_tokens, got.tasks) == (0.01, "all", 6, 2)
        assert state.record("eval", 3)["data"] == got.model_dump() and got.rules_cid == "bafkreirules"
        assert evaluate_and_record(4, tmp_path / "no-model", tasks, settings, engine=TransformersEngine(),
                                   chat_template=False, rules_cid=None, state=state, metrics=metrics) is None
        assert state.record("eval", 4) is None  # a failed evaluation records nothing and never raises
        assert 'errors_total{kind="eval"} 1' in metrics.render()  # counted
    finally:
        state.close()


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


def _rules_file(tmp_path: Path, **change: object) -> tuple[Path, str, object]:
    """A rules document (α 0.01, scope `all`, cpu budgets 4/6) whose held-out set (3 tasks) is in an embedded
    IPFS store under tmp_path/ipfs; returns (its file, the store spec, the rules)."""
    from intellect.sdk.ipfs import EmbeddedIpfs

    ipfs = EmbeddedIpfs(tmp_path / "ipfs")
    train = synthetic_task_set(8, seed=0, max_operand=9, ops=("+",))
    held = synthetic_task_set(3, seed=7, max_operand=9, ops=("+",))
    rules = PoolRules.build({"taskset_cid": ipfs.add(train.to_jsonl_bytes()), "heldout_cid": ipfs.add(held.to_jsonl_bytes()),
                             "model": {"family": "tiny-llama"}, "group_size": 4, "problems_per_task": 2,
                             "budgets": {"cpu": [4, 6], "gpu-large": [16]}, "length_alpha": 0.01,
                             "length_scope": "all", "max_units_per_submission": 16 * 4 * 2, **change})
    path = tmp_path / "rules.json"
    path.write_bytes(rules.to_bytes())
    return path, f"embedded:{tmp_path / 'ipfs'}", rules


def test_held_out_max_tokens_is_the_trainers_rule() -> None:
    """One function decides the evaluation budget for the trainer (`held_out.evaluate_and_record`, checked in
    `test_trainer_evaluates_under_its_pools_length_scope`) and for `eval --rules/--pool`."""
    from intellect.agents.evaluation import held_out_max_tokens

    budgets = {"cpu": [4, 6], "gpu-large": [16]}
    assert held_out_max_tokens(budgets) == 6
    assert held_out_max_tokens({"gpu-small": [32, 8], "gpu-large": [64]}) == 32  # no cpu: the smallest class


def test_cli_eval_takes_the_pools_rules(tiny_dir: Path, tmp_path: Path) -> None:
    """`eval --rules FILE` without --taskset: the rules' held-out set, budget, α and scope (issue 17)."""
    path, store, _ = _rules_file(tmp_path)
    ok = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--rules", str(path), "--ipfs", store, "--json"])
    assert ok.exit_code == 0, ok.output
    doc = json.loads(ok.stdout.strip().splitlines()[-1])
    assert doc["task_set"] == "synthetic-arithmetic-7" and doc["tasks"] == 3  # the held-out set (seed 7), not training
    assert (doc["max_tokens"], doc["length_alpha"], doc["length_scope"]) == (6, 0.01, "all")
    assert doc["rules_cid"] == PoolRules.from_bytes(path.read_bytes()).cid() and doc["chat_template"] is True
    # the same document by CID, with flags that agree with it
    from intellect.sdk.ipfs import EmbeddedIpfs

    cid = EmbeddedIpfs(tmp_path / "ipfs").add(path.read_bytes())
    same = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--rules", cid, "--ipfs", store, "--json",
                                     "--max-tokens", "6", "--length-scope", "all", "--max-tasks", "1"])
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout.strip().splitlines()[-1])["max_tokens"] == 6


def test_cli_eval_refuses_flags_that_contradict_the_rules(tiny_dir: Path, tmp_path: Path) -> None:
    path, store, _ = _rules_file(tmp_path)
    base = ["eval", "--model", str(tiny_dir), "--rules", str(path), "--ipfs", store]
    bad = CliRunner().invoke(main, [*base, "--length-scope", "solved"])
    assert bad.exit_code == 2 and "length_scope: local 'solved', pool rules 'all'" in bad.output
    bad = CliRunner().invoke(main, [*base, "--max-tokens", "16", "--length-alpha", "0", "--no-chat-template"])
    assert bad.exit_code == 2
    assert all(f in bad.output for f in ("max_tokens: local 16, pool rules 6", "length_alpha", "model.chat_template"))
    none = _rules_file(tmp_path / "b", heldout_cid=None)[0]
    bad = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--rules", str(none), "--ipfs", store])
    assert bad.exit_code == 2 and "heldout_cid" in bad.output
    bad = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir)])
    assert bad.exit_code == 2 and "--taskset" in bad.output


def test_cli_eval_refuses_what_is_no_rules_document(tiny_dir: Path, tmp_path: Path) -> None:
    path, store, _ = _rules_file(tmp_path)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("this is not json\n")
    v2 = tmp_path / "v2.json"
    v2.write_text(path.read_text().replace("intellect.poolrules/v1", "intellect.poolrules/v2"))
    held = synthetic_task_set(2, seed=1, max_operand=9, ops=("+",)).save(tmp_path / "held.jsonl")
    for src, why in ((garbage, "not a JSON document"), (v2, "'intellect.poolrules/v2' is not supported"),
                     (held, "not a JSON document"), ("bafkreinotacid", "not fetchable")):
        bad = CliRunner().invoke(main, ["eval", "--model", str(tiny_dir), "--rules", str(src), "--ipfs", store])
        assert bad.exit_code == 2 and why in bad.output and "--rules" in bad.output, (src, bad.output)


def test_cli_eval_takes_the_rules_the_chain_names(tiny_dir: Path, tmp_path: Path) -> None:
    """`--pool ID` reads the pool's rules CID from the chain (anvil with the contracts; the pool made by
    `intellect pool create`) and the document from --ipfs; with --rules too, the two must be the same document."""
    from cli_runner import run_cli

    from intellect.sdk import devnet
    from intellect.sdk.ipfs import EmbeddedIpfs

    path, store, rules = _rules_file(tmp_path)
    net = devnet.start(tmp_path / "devnet")
    try:
        chain = ["--network", net.url, "--deployment", str(net.deployment_file)]
        code, out, err = run_cli([*chain, "--dev-account", "0", "--json", "pool", "create", "--rules", str(path),
                                  "--window", "300", "--vote-period", "120", "--lease", "600", "--ipfs", store])
        assert code == 0, out + err
        created = json.loads(out.strip().splitlines()[-1])
        pool, cid = str(created["pool_id"]), created["rules_cid"]
        assert EmbeddedIpfs(tmp_path / "ipfs").cat(cid)  # the document the chain names is in the store
        base = ["eval", "--model", str(tiny_dir), "--ipfs", store, *chain]
        ok = CliRunner().invoke(main, [*base, "--pool", pool, "--json", "--max-tasks", "1"])
        assert ok.exit_code == 0, ok.output
        doc = json.loads(ok.stdout.strip().splitlines()[-1])
        assert (doc["max_tokens"], doc["length_scope"], doc["task_set"]) == (6, "all", "synthetic-arithmetic-7")
        assert doc["rules_cid"] == cid  # the result names the rules it was scored under
        bad = CliRunner().invoke(main, [*base, "--pool", pool, "--length-scope", "solved"])
        assert bad.exit_code == 2 and "length_scope" in bad.output
        other = _rules_file(tmp_path / "o", length_alpha=0.02)[0]
        bad = CliRunner().invoke(main, [*base, "--pool", pool, "--rules", str(other)])
        assert bad.exit_code == 2 and f"pool {pool}'s rules on the chain are {cid}" in bad.output
        # a pool made before the rules: its CID names the bare task set
        p = net.protocol(0)
        params = p.pool(int(pool)).params.model_copy(update={"rules_cid": rules.taskset_cid})  # type: ignore[attr-defined]
        bare = p.create_pool(params)
        bad = CliRunner().invoke(main, [*base, "--pool", str(bare)])
        assert bad.exit_code == 2 and "names no rules document" in bad.output, bad.output
    finally:
        net.stop()
