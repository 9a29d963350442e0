"""One GRPO recipe (issue 34): `GRPOConfig` is declared once (`agents/recipe.py`) and the trainer agent's settings
nest it (`trainer.grpo`, the agent's defaults in `TrainerRecipe`); configs written flat before it still load,
with a deprecation warning, and a key given both ways is refused."""

from __future__ import annotations

import pytest

from intellect.agents.config import TrainerSettings, load_config
from intellect.agents.grpo_trainer import GRPOConfig as TrainerModuleConfig
from intellect.agents.recipe import GRPOConfig, TrainerRecipe
from intellect.sdk import ConfigError


def test_the_trainer_module_takes_the_one_recipe() -> None:
    assert TrainerModuleConfig is GRPOConfig and issubclass(TrainerRecipe, GRPOConfig)


def test_a_partial_nested_recipe_keeps_the_agents_defaults() -> None:
    cfg = load_config(None, overrides={"trainer.grpo.epsilon": "0.3"}, role="trainer")
    assert (cfg.trainer.grpo.epsilon, cfg.trainer.grpo.lr, cfg.trainer.grpo.optimizer_steps) == (0.3, 1e-5, 1)
    assert GRPOConfig().lr == 3e-7  # the paper's default stays the model's own


def test_the_flat_form_of_earlier_configs_loads_with_a_deprecation(tmp_path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("role: trainer\ntrainer:\n  learning_rate: 2.0e-5\n  filter_zero_advantage: false\n"
                    "  keep_checkpoints: 6\n  seed: 3\n")
    with pytest.warns(DeprecationWarning, match=r"trainer\.learning_rate -> trainer\.grpo\.lr"):
        old = load_config(path)
    new = load_config(None, overrides={"trainer.grpo.lr": "2.0e-5", "trainer.grpo.filter_zero_advantage": "false",
                                       "trainer.grpo.keep_checkpoints": "6", "trainer.grpo.seed": "3"},
                      role="trainer")
    assert old.trainer.grpo == new.trainer.grpo


def test_a_key_given_flat_and_nested_is_refused() -> None:
    with pytest.raises(ConfigError, match="given both flat and under grpo"):
        load_config(None, overrides={"trainer.learning_rate": "1e-4", "trainer.grpo.lr": "2e-4"}, role="trainer")


def test_unknown_and_out_of_range_recipe_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"trainer\.grpo\.lrate"):
        load_config(None, overrides={"trainer.grpo.lrate": "1e-4"}, role="trainer")
    with pytest.raises(ConfigError, match=r"trainer\.grpo\.delta"):
        load_config(None, overrides={"trainer.grpo.delta": "0.5"}, role="trainer")
    assert TrainerSettings().grpo == TrainerRecipe()
