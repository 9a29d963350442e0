"""`python -m intellect.agents.adversary --config FILE`: run an agent as `intellect-agent` does, with the
cheating worker class `worker.adversary` or validator class `validator.adversary` names (tests and the demo
start their cheaters this way)."""

from __future__ import annotations

from typing import Any

from intellect.agents import cli
from intellect.agents.adversary import adversary_class, validator_class
from intellect.agents.config import AgentConfig, Role


def build_agent(cfg: AgentConfig) -> Any:
    if cfg.role is Role.WORKER:
        return adversary_class(cfg.worker.adversary)(cfg)
    if cfg.role is Role.VALIDATOR and cfg.validator.adversary is not None:
        return validator_class(cfg.validator.adversary)(cfg)
    return cli.build_agent(cfg)


if __name__ == "__main__":
    cli.main(obj={"build_agent": build_agent})
