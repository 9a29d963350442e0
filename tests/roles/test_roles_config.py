"""Agent configuration: YAML < env < flags, clear errors naming the field."""

import pytest

from intellect.agents.config import ConfigError, Role, load_config


def test_load_config_layers_env_and_flags(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("role: worker\nworker:\n  group_size: 8\n  gpu_model: H100\nchain:\n  dev_account: 3\n")
    env = {"INTELLECT_AGENT__WORKER__GROUP_SIZE": "6", "INTELLECT_AGENT__CHAIN__RPC_URL": "http://x:1", "OTHER": "1"}
    cfg = load_config(path, env=env, overrides={"worker.temperature": "0.7"})
    assert cfg.role is Role.WORKER
    assert cfg.worker.group_size == 6  # env beats the file
    assert cfg.worker.gpu_model == "H100"
    assert cfg.worker.temperature == 0.7
    assert cfg.chain.rpc_url == "http://x:1"
    cfg = load_config(path, env=env, overrides={"worker.group_size": "10"})
    assert cfg.worker.group_size == 10  # flags beat env


def test_load_config_names_bad_field(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("role: worker\nworker:\n  group_size: one\n")
    with pytest.raises(ConfigError, match=r"worker\.group_size"):
        load_config(path, env={})
    path.write_text("role: worker\nworkr: {}\n")
    with pytest.raises(ConfigError, match="workr"):
        load_config(path, env={})


def test_load_config_refuses_missing_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml", env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("role: [worker\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, env={})
    bad.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(bad, env={})


def test_load_config_exclusive_key_sources(tmp_path):
    with pytest.raises(ConfigError, match="exclusive"):
        load_config(None, env={}, role="validator", overrides={"chain.keystore": "k.json", "chain.dev_account": "1"})


def test_load_config_role_from_flag_without_file():
    cfg = load_config(None, env={}, role="relay", overrides={"relay.upstreams": "[http://a, http://b]"})
    assert cfg.role is Role.RELAY
    assert cfg.relay.upstreams == ["http://a", "http://b"]
