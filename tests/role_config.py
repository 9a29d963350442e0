"""The config of one role agent run in-process against a test devnet: the chain section every role test spells
the same way (the devnet's RPC URL and deployment file, a dev account), so a test names only its role, data
folder, account and what is particular to it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from intellect.agents.config import AgentConfig, load_config


def role_config(devnet: Any, role: str, data_dir: Path, account: int, overrides: dict[str, str] | None = None, *,
                path: Path | None = None) -> AgentConfig:
    """`load_config(path, env={})` for `role` on `devnet` (its `url` and `deployment_file`, as
    `intellect.sdk.devnet.start` returns), its data in `data_dir`, keyed by dev account `account`;
    `overrides` (dotted keys, as `--set`) come last and win."""
    return load_config(path, env={}, overrides={
        "role": role, "data_dir": str(data_dir), "chain.rpc_url": devnet.url,
        "chain.deployment_file": str(devnet.deployment_file), "chain.dev_account": str(account), **(overrides or {})})


def swarm_pool_config(devnet: Any, data_dir: Path, role: str, account: int, **over: str) -> AgentConfig:
    """`role_config` in the swarm tests' pool shape (2 problems × 4 completions, budgets of at most 8 tokens) with
    every server port picked by the OS: the store tests' agents, run in-process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir.parent / f"{data_dir.name}.yaml"
    path.write_text(yaml.safe_dump({"tasks": {"budgets": {"cpu": [6, 8]}},
                                    "worker": {"problems_per_task": 2, "group_size": 4}}))
    return role_config(devnet, role, data_dir, account,
                       {"server.port": "0", "server.ipfs_port": "0", "server.shardcast_port": "0", **over}, path=path)
