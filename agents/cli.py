"""`intellect-agent`: run one role of the protocol (trainer, worker, validator, relay).

    intellect-agent --role worker --config worker.yaml --set worker.gpu_model=H100 --set chain.dev_account=3
    intellect-agent eval --model data/trainer/checkpoints/step-12 --taskset heldout.jsonl   # pass@1, mean reward

    intellect-agent --role trainer --set trainer.device=cuda --set trainer.dtype=bf16  # one GPU, bf16 autocast

Configuration precedence: field defaults < YAML file < INTELLECT_AGENT__SECTION__FIELD env < --set.
Exit codes: 0 clean stop, 2 bad configuration (also: a device this machine lacks, e.g. cuda without a GPU),
3 the agent refused to start (e.g. missing stake).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Literal

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
    """The agent object for `cfg.role` (not started). A worker with `worker.adversary` set is the attack
    kit's, which this product CLI does not load: `python -m intellect.agents.adversary` runs it."""
    if cfg.role is Role.WORKER:
        if cfg.worker.adversary is not None:
            raise click.UsageError(f"worker.adversary {cfg.worker.adversary!r} is a test-only cheating worker: run it "
                                   "with `python -m intellect.agents.adversary` (the attack kit), not intellect-agent")
        from intellect.agents.roles.worker import Worker

        return Worker(cfg)
    if cfg.role is Role.VALIDATOR:
        if cfg.validator.adversary is not None:
            raise click.UsageError(f"validator.adversary {cfg.validator.adversary!r} is a test-only cheating validator: "
                                   "run it with `python -m intellect.agents.adversary`, not intellect-agent")
        from intellect.agents.roles.validator import Validator

        return Validator(cfg)
    if cfg.role is Role.TRAINER:
        from intellect.agents.roles.trainer import Trainer

        return Trainer(cfg)
    from intellect.agents.roles.relay import RelayAgent

    return RelayAgent(cfg)


class _Help(click.Group):
    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write("\n")
        for line in _fields_help().splitlines():
            formatter.write(line + "\n")


@click.group(cls=_Help, invoke_without_command=True,
             help="Run one intellect-protocol agent: trainer, worker, validator or relay (or a subcommand).")
@click.option("--role", type=click.Choice([r.value for r in Role]), default=None,
              help="the role to run (overrides the file's `role`)")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), default=None,
              help="YAML configuration file")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="override a field, e.g. --set worker.group_size=8 (repeatable)")
@click.option("--print-config", is_flag=True, help="print the resolved configuration as JSON and exit")
@click.pass_context
def main(ctx: click.Context, role: str | None, config_path: str | None, sets: tuple[str, ...],
         print_config: bool) -> None:
    if ctx.invoked_subcommand is not None:
        return
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
    from intellect.agents.hardware import check_role

    try:  # CUDA asked for where there is none: exit 2 naming the key, before any chain or model work
        placement = check_role(cfg)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    from intellect.agents.roles._runtime import AgentError, setup_logging

    setup_logging(cfg.log_level, cfg.log_json, role=cfg.role.value)
    if placement is not None:
        log.info("%s model on %s in %s", cfg.role.value, placement.device, placement.dtype)
    agent = (ctx.obj or {}).get("build_agent", build_agent)(cfg)  # the attack kit's launcher passes its own
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


@main.command("eval", short_help="Held-out pass@1 (temperature 0) and mean reward of a checkpoint.")
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="HF causal-LM directory (a trainer checkpoint or a base model)")
@click.option("--taskset", required=True, help="task-set file (.jsonl/.parquet) or its IPFS CID")
@click.option("--ipfs", "ipfs_spec", default="embedded:data/ipfs", show_default=True, envvar="INTELLECT_IPFS",
              help="where a CID is fetched from: embedded:/path or kubo:http://127.0.0.1:5001")
@click.option("--max-tokens", type=click.IntRange(min=1), default=128, show_default=True,
              help="completion budget (the thinking budget stated in the prompt)")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None, help="only the first N tasks")
@click.option("--length-alpha", type=float, default=0.0, show_default=True, help="length-penalty α of the reward")
@click.option("--length-scope", type=click.Choice(["solved", "all"]), default="solved", show_default=True,
              help="completions the length penalty applies to (the pool rules' length_scope)")
@click.option("--device", default="cpu", show_default=True)
@click.option("--chat-template/--no-chat-template", default=True, show_default=True,
              help="prompt in the model's chat template when it has one (a pool's `chat_template: model`)")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def eval_cmd(model_dir: Path, taskset: str, ipfs_spec: str, max_tokens: int, max_tasks: int | None,
             length_alpha: float, length_scope: Literal["solved", "all"], device: str, chat_template: bool,
             as_json: bool) -> None:
    """Evaluate MODEL on TASKSET: one greedy completion per task, prompted as the pool's workers prompt."""
    from intellect.agents.evaluation import evaluate_checkpoint
    from intellect.verifier.tasks import TaskSet, TaskSetError

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if Path(taskset).is_file():
            ts = TaskSet.load(Path(taskset))
        else:
            from intellect.sdk import IntellectError
            from intellect.sdk.ipfs import open_ipfs

            try:
                ts = TaskSet.from_bytes(open_ipfs(ipfs_spec).cat(taskset, max_size=256 << 20), name=taskset)
            except IntellectError as exc:
                raise click.UsageError(f"--taskset {taskset!r} is no file and not fetchable from {ipfs_spec}: {exc}") from None
    except TaskSetError as exc:
        raise click.UsageError(str(exc)) from None
    tasks = list(ts)[:max_tasks] if max_tasks else list(ts)
    result = evaluate_checkpoint(model_dir, tasks, max_tokens=max_tokens, length_alpha=length_alpha,
                                 length_scope=length_scope, task_set=ts.name, device=device,
                                 chat_template=chat_template)
    if as_json:
        click.echo(result.model_dump_json())
    else:
        click.echo(f"{model_dir} (step {result.step if result.step is not None else '-'}) on {ts.name}: "
                   f"pass@1 {result.pass_at_1:.3f}  mean reward {result.mean_reward:.3f}  "
                   f"({result.tasks} tasks, {result.mean_completion_tokens:.1f} tokens/completion, "
                   f"{result.seconds:.1f}s)")


if __name__ == "__main__":
    main()
