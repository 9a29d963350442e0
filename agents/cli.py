"""`intellect-agent`: run one role of the protocol (trainer, worker, validator, relay).

    intellect-agent --role worker --config worker.yaml --set worker.gpu_model=H100 --set chain.dev_account=3

Configuration precedence: field defaults < YAML file < INTELLECT_AGENT__SECTION__FIELD env < --set.
Exit codes: 0 clean stop, 2 bad configuration, 3 the agent refused to start (e.g. missing stake).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import click
from pydantic import BaseModel

from intellect.agents.config import AgentConfig, ConfigError, Role, load_config

__all__ = ["build_agent", "config_fields", "main"]

log = logging.getLogger(__name__)


def config_fields(model: type[BaseModel] = AgentConfig, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type/default, description) for every configuration field."""
    out: list[tuple[str, str, str]] = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += config_fields(ann, key + ".")
            continue
        default = field.get_default(call_default_factory=True) if not field.is_required() else "required"
        doc = (field.description or _attr_doc(model, name) or "").strip().replace("\n", " ")
        out.append((key, f"default {default!r}" if default != "required" else "required", doc))
    return out


def _attr_doc(model: type[BaseModel], name: str) -> str:
    """The docstring written under a field in the class body (pydantic keeps it when configured)."""
    import ast
    import inspect

    try:
        tree = ast.parse(inspect.getsource(model))
    except (OSError, TypeError, SyntaxError):
        return ""
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    for i, node in enumerate(body[:-1]):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            nxt = body[i + 1]
            if isinstance(nxt, ast.Expr) and isinstance(getattr(nxt, "value", None), ast.Constant):
                return str(nxt.value.value)
    return ""


def _fields_help() -> str:
    lines = ["Configuration fields (YAML keys, --set KEY=VALUE, or INTELLECT_AGENT__SECTION__FIELD):", ""]
    for key, default, doc in config_fields():
        lines.append(f"  {key} ({default}){': ' + doc if doc else ''}")
    return "\n".join(lines)


def build_agent(cfg: AgentConfig) -> Any:
    """The agent object for `cfg.role` (not started)."""
    if cfg.role is Role.WORKER:
        from intellect.agents.adversary import adversary_class

        return adversary_class(cfg.worker.adversary)(cfg)
    if cfg.role is Role.VALIDATOR:
        from intellect.agents.validator import Validator

        return Validator(cfg)
    if cfg.role is Role.TRAINER:
        from intellect.agents.trainer import Trainer

        return Trainer(cfg)
    from intellect.agents.relay import RelayAgent

    return RelayAgent(cfg)


class _Help(click.Command):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write("\n")
        for line in _fields_help().splitlines():
            formatter.write(line + "\n")


@click.command(cls=_Help, help="Run one intellect-protocol agent: trainer, worker, validator or relay.")
@click.option("--role", type=click.Choice([r.value for r in Role]), default=None,
              help="the role to run (overrides the file's `role`)")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="YAML configuration file")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="override a field, e.g. --set worker.group_size=8 (repeatable)")
@click.option("--print-config", is_flag=True, help="print the resolved configuration as JSON and exit")
def main(role: str | None, config_path: str | None, sets: tuple[str, ...], print_config: bool) -> None:
    overrides: dict[str, str] = {}
    for item in sets:
        if "=" not in item:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--set")
        k, v = item.split("=", 1)
        overrides[k.strip()] = v
    try:
        cfg = load_config(config_path, overrides=overrides, role=role)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    if print_config:
        click.echo(json.dumps(json.loads(cfg.model_dump_json()), indent=2))
        return
    from intellect.agents._runtime import AgentError, setup_logging

    setup_logging(cfg.log_level, cfg.log_json, role=cfg.role.value)
    agent = build_agent(cfg)
    agent.install_signals()
    try:
        agent.run()
    except AgentError as exc:
        log.error("%s", exc)
        sys.exit(3)
    except ConfigError as exc:
        log.error("configuration: %s", exc)
        sys.exit(2)
    except Exception as exc:
        from intellect.sdk import IntellectError

        if isinstance(exc, IntellectError):
            log.error("%s", exc)
            sys.exit(3)
        raise
    log.info("%s stopped", cfg.role.value)


if __name__ == "__main__":
    main()
