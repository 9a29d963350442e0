"""The demo's learning set-up: the cached warm start keyed by its recipe, the trainer's recipe from
the pool's task settings, the worker's per-step quota and the demo's pool rules."""

from __future__ import annotations

import pytest

from intellect.agents.config import TaskSettings, load_config
from intellect.agents.roles._runtime import AgentError
from intellect.agents.roles.trainer import warm_start_recipe
from intellect.agents.roles.worker import Worker
from intellect.agents.warmstart import WarmStartRecipe, warm_start_cached
from intellect.verifier.submission import prompt_text


def test_warm_start_recipe_covers_every_pool_budget():
    recipe = warm_start_recipe(TaskSettings(source="synthetic:64:3", budgets={"cpu": [8, 6], "gpu-large": [16, 8]}))
    assert (recipe.tasks, recipe.task_seed, recipe.target_lengths) == (64, 3, (6, 8, 16))


@pytest.mark.parametrize("source", ["pool", "tasks.jsonl", "synthetic:64", "synthetic:x:0"])
def test_warm_start_recipe_non_synthetic_source_refused(source):
    with pytest.raises(AgentError, match=r"tiny-warm needs tasks\.source synthetic:N:SEED"):
        warm_start_recipe(TaskSettings(source=source))


def test_warm_start_recipe_key_changes_with_recipe():
    a = WarmStartRecipe(target_lengths=(6, 8))
    assert a.key() == WarmStartRecipe(target_lengths=(6, 8)).key()
    assert a.key() != WarmStartRecipe(target_lengths=(6, 8, 10)).key()
    assert a.key() != WarmStartRecipe(target_lengths=(6, 8), steps=601).key()


def test_warm_start_cached_builds_once_then_reuses(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    recipe = WarmStartRecipe(tasks=8, steps=3, batch_size=4, target_lengths=(6,))
    first = warm_start_cached(recipe, root=tmp_path)
    assert first.name == f"tiny-warm-{recipe.key()}"
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert warm_start_cached(recipe, root=tmp_path) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tiny-warm-")]  # no temp dir left
    model = AutoModelForCausalLM.from_pretrained(str(first))
    assert model.config.num_hidden_layers == 2
    assert AutoTokenizer.from_pretrained(str(first)).eos_token is not None


def test_warm_start_prompts_match_the_workers(tmp_path):
    """The warm start trains on `prompt_text(task, target)`: the exact prompt a worker sends."""
    from intellect.agents.tasks import synthetic_task_set

    task = next(iter(synthetic_task_set(1, seed=0, max_operand=20, ops=("+",))))
    assert prompt_text(task, 6).startswith(task.prompt) and "6 tokens" in prompt_text(task, 6)


def _worker(tmp_path, limit: int | None) -> Worker:
    """A real worker agent with `worker.tasks_per_step` = `limit` (no chain: the quota reads its state store)."""
    over = {"role": "worker", "data_dir": str(tmp_path / "w")}
    return Worker(load_config(None, env={}, overrides=over | ({} if limit is None else
                                                              {"worker.tasks_per_step": str(limit)})))


def test_step_quota_used_counts_submissions_per_policy_step(tmp_path):
    w = _worker(tmp_path, 2)
    assert not w.step_quota_used(0)
    w.state.put("submission", 1, "sent", {"policy_step": 0})
    assert not w.step_quota_used(0)
    w.state.put("submission", 2, "planned", {"policy_step": 0})
    assert w.step_quota_used(0)
    assert not w.step_quota_used(1)
    w.state.close()


def test_step_quota_used_without_limit_never_waits(tmp_path):
    w = _worker(tmp_path, None)
    assert w.cfg.worker.tasks_per_step is None
    for i in range(5):
        w.state.put("submission", i, "sent", {"policy_step": 0})
    assert not w.step_quota_used(0)
    w.state.close()


def test_pool_rules_tiny_warm_one_task_per_step():
    from intellect.agents.demo.swarm import DemoOptions, pool_rules

    rules = pool_rules(DemoOptions(steps=4))
    assert rules["trainer"]["model"] == "tiny-warm"
    assert rules["worker"]["tasks_per_step"] == 1 and rules["worker"]["max_tasks"] == 5
    assert pool_rules(DemoOptions(steps=4, tasks_per_step=None))["worker"]["max_tasks"] == 15
