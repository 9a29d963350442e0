"""`intellect-agent`: run one role of the protocol (trainer, worker, validator, relay).

    intellect-agent --role worker --config worker.yaml --set worker.gpu_model=H100 --set chain.dev_account=3
    intellect-agent eval --model data/trainer/checkpoints/step-12 --taskset heldout.jsonl   # pass@1, mean reward

    intellect-agent --role trainer --set trainer.device=cuda --set trainer.dtype=bf16  # one GPU, bf16 autocast

Configuration precedence: field defaults < YAML file < INTELLECT_AGENT__SECTION__FIELD env < --set.
Exit codes: 0 clean stop, 2 bad configuration (also: a device this machine lacks, e.g. cuda without a GPU),
3 the agent refused to start (e.g. missing stake) or the network failed (an RPC URL answering HTTP 401/403/404/5xx:
one line naming the status).
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
from intellect.agents.evaluation import evaluate_checkpoint, held_out_max_tokens
from intellect.agents.hardware import check_role
from intellect.agents.roles._runtime import AgentError, setup_logging
from intellect.agents.roles.pool_rules import fetch_pool_rules
from intellect.agents.supervise import child_argv
from intellect.agents.supervise import supervise as run_supervised
from intellect.sdk import IntellectError, Protocol
from intellect.sdk.ipfs import open_ipfs
from intellect.sdk.poolrules import MAX_RULES_BYTES, PoolRules, conflicts
from intellect.verifier.tasks import TaskSet, TaskSetError

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
        from intellect.agents.roles.worker import Worker  # deferred: each role loads only its own stack

        return Worker(cfg)
    if cfg.role is Role.VALIDATOR:
        if cfg.validator.adversary is not None:
            raise click.UsageError(f"validator.adversary {cfg.validator.adversary!r} is a test-only cheating validator: "
                                   "run it with `python -m intellect.agents.adversary`, not intellect-agent")
        from intellect.agents.roles.validator import Validator  # deferred: each role loads only its own stack

        return Validator(cfg)
    if cfg.role is Role.TRAINER:
        # deferred: each role loads only its own stack; under torchrun a rank above 0 gets a follower (issue 38)
        from intellect.agents.roles.trainer import trainer_agent

        return trainer_agent(cfg)
    from intellect.agents.roles.relay import RelayAgent  # deferred: each role loads only its own stack

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
@click.option("--supervise", is_flag=True,
              help="run the agent as a child and restart it whenever it dies (kill -9, a crash; not a clean stop or "
                   "a configuration error), for hosts without systemd")
@click.pass_context
def main(ctx: click.Context, role: str | None, config_path: str | None, sets: tuple[str, ...],
         print_config: bool, supervise: bool) -> None:
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

    try:  # CUDA asked for where there is none: exit 2 naming the key, before any chain or model work
        placement = check_role(cfg)
    except ConfigError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)

    setup_logging(cfg.log_level, cfg.log_json, role=cfg.role.value)
    if supervise:
        sys.exit(run_supervised(child_argv(sys.argv[1:])))
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
        if isinstance(exc, IntellectError):
            log.error("%s", exc)
            sys.exit(3)
        raise
    log.info("%s stopped", cfg.role.value)


_EVAL_DEFAULTS = {"max_tokens": 128, "length_alpha": 0.0, "length_scope": "solved", "chat_template": True}
"""`intellect-agent eval`'s settings when neither the command line nor pool rules give them."""


def _load_eval_rules(rules_src: str | None, pool_id: int | None, ipfs_spec: str, chain: dict[str, Any]) -> Any:
    """The `PoolRules` `--rules` (file or CID) and/or `--pool` (the chain's `rules_cid`) name, or None.

    With both, the document must be the one the pool's chain record names. Every failure is a
    `click.UsageError` naming the option and what was wrong."""
    if rules_src is None and pool_id is None:
        return None
    rules = None
    if rules_src is not None:
        if Path(rules_src).is_file():
            with open(rules_src, "rb") as fh:  # one byte over the limit is enough for from_bytes to refuse it
                data, where = fh.read(MAX_RULES_BYTES + 1), f"--rules file {rules_src}"
        else:
            try:
                data = open_ipfs(ipfs_spec).cat(rules_src, max_size=MAX_RULES_BYTES)
            except IntellectError as exc:
                raise click.UsageError(f"--rules {rules_src!r} is no file and not fetchable from {ipfs_spec}: "
                                       f"{exc}") from None
            where = f"--rules {rules_src}"
        try:
            rules = PoolRules.from_bytes(data, source=where)
        except IntellectError as exc:  # PoolRulesError, SchemaVersionError
            raise click.UsageError(f"{exc} (--rules takes an intellect.poolrules/v1 document)") from None
    if pool_id is None:
        return rules

    try:
        cid = Protocol.connect(chain["network"], rpc_url=chain["rpc_url"],
                               deployment=chain["deployment"]).pool(pool_id).params.rules_cid
    except IntellectError as exc:
        raise click.UsageError(f"--pool {pool_id}: its rules CID could not be read from the chain "
                               f"({chain['rpc_url'] or chain['network']}): {exc}") from None
    if rules is not None:
        if rules.cid() != cid:
            raise click.UsageError(f"--rules {rules_src} is document {rules.cid()}, but pool {pool_id}'s rules on "
                                   f"the chain are {cid}: pass one of --rules and --pool")
        return rules
    try:
        rules = fetch_pool_rules(cid, open_ipfs(ipfs_spec))
    except IntellectError as exc:
        raise click.UsageError(f"--pool {pool_id}: its rules {cid} could not be read from {ipfs_spec}: {exc}") from None
    if rules is None:
        raise click.UsageError(f"--pool {pool_id} names no rules document (its CID {cid} is a bare task set, a pool "
                               "made before the rules): pass --taskset, --length-alpha, --max-tokens by hand")
    return rules


def _eval_settings(rules: Any, explicit: dict[str, Any]) -> dict[str, Any]:
    """`max_tokens`, `length_alpha`, `length_scope`, `chat_template` of an evaluation: the explicit flags
    (None: not given), else the pool rules' (as the trainer's held-out evaluation uses them), else the old
    defaults. A flag that contradicts the rules is a `click.UsageError` naming the field."""
    given = {k: v for k, v in explicit.items() if v is not None}
    if rules is None:
        return {**_EVAL_DEFAULTS, **given}

    pool = {"max_tokens": held_out_max_tokens(rules.budgets), "length_alpha": rules.length_alpha,
            "length_scope": rules.length_scope, "chat_template": rules.model.chat_template == "model"}
    problems = conflicts(rules, {k: given[k] for k in ("length_alpha", "length_scope") if k in given})
    if "max_tokens" in given and given["max_tokens"] != pool["max_tokens"]:
        problems.append(f"max_tokens: local {given['max_tokens']}, pool rules {pool['max_tokens']} (the largest cpu "
                        "budget, what the trainer's held-out evaluation uses)")
    if "chat_template" in given and given["chat_template"] != pool["chat_template"]:
        problems.append(f"model.chat_template: local {'model' if given['chat_template'] else 'none'!r}, "
                        f"pool rules {rules.model.chat_template!r}")
    if problems:
        raise click.UsageError("flags contradict the pool rules: " + "; ".join(problems)
                               + ". Leave them out (eval takes the rules' values) or drop --rules/--pool")
    return pool


@main.command("eval", short_help="Held-out pass@1 (temperature 0) and mean reward of a checkpoint.")
@click.option("--model", "model_dir", type=click.Path(exists=True, file_okay=False, path_type=Path), required=True,
              help="HF causal-LM directory (a trainer checkpoint or a base model)")
@click.option("--taskset", default=None,
              help="task-set file (.jsonl/.parquet) or its IPFS CID (default with --rules/--pool: the rules' "
                   "held-out set, heldout_cid)")
@click.option("--rules", "rules_src", default=None, metavar="CID|FILE",
              help="evaluate as this pool-rules document (intellect.poolrules/v1) says: its budget, length α and "
                   "scope, chat template and held-out set, as the trainer's own evaluation does")
@click.option("--pool", "pool_id", type=click.IntRange(min=1), default=None,
              help="take the rules from this pool's on-chain rules CID (fetched through --ipfs)")
@click.option("--network", default="development", show_default=True, envvar="INTELLECT_NETWORK",
              help="with --pool: development | base-sepolia | base-mainnet, or an RPC URL")
@click.option("--rpc-url", default=None, envvar="INTELLECT_RPC_URL", help="with --pool: RPC URL (overrides the "
              "network's default)")
@click.option("--deployment", type=click.Path(dir_okay=False, path_type=Path), default=None,
              envvar="INTELLECT_DEPLOYMENT", help="with --pool: deployment file (default: deployments/<chainId>.json)")
@click.option("--ipfs", "ipfs_spec", default="embedded:data/ipfs", show_default=True, envvar="INTELLECT_IPFS",
              help="where a CID is fetched from: embedded:/path or kubo:http://127.0.0.1:5001")
@click.option("--max-tokens", type=click.IntRange(min=1), default=None,
              help="completion budget (the thinking budget stated in the prompt) [default: 128; with rules: the "
                   "largest cpu budget]")
@click.option("--max-tasks", type=click.IntRange(min=1), default=None, help="only the first N tasks")
@click.option("--length-alpha", type=float, default=None,
              help="length-penalty α of the reward [default: 0; with rules: theirs]")
@click.option("--length-scope", type=click.Choice(["solved", "all"]), default=None,
              help="completions the length penalty applies to [default: solved; with rules: theirs]")
@click.option("--device", default="cpu", show_default=True)
@click.option("--chat-template/--no-chat-template", default=None,
              help="prompt in the model's chat template when it has one [default: on; with rules: on for "
                   "`chat_template: model`]")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
def eval_cmd(model_dir: Path, taskset: str | None, rules_src: str | None, pool_id: int | None, network: str,
             rpc_url: str | None, deployment: Path | None, ipfs_spec: str, max_tokens: int | None,
             max_tasks: int | None, length_alpha: float | None, length_scope: Literal["solved", "all"] | None,
             device: str, chat_template: bool | None, as_json: bool) -> None:
    """Evaluate MODEL on TASKSET: one greedy completion per task, prompted as the pool's workers prompt.

    With --rules CID|FILE or --pool ID, the settings come from the pool's rules as the trainer's held-out
    evaluation takes them; a flag that contradicts them is refused, naming the field."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    rules = _load_eval_rules(rules_src, pool_id, ipfs_spec,
                             {"network": network, "rpc_url": rpc_url, "deployment": deployment})
    settings = _eval_settings(rules, {"max_tokens": max_tokens, "length_alpha": length_alpha,
                                      "length_scope": length_scope, "chat_template": chat_template})
    what = "--taskset"
    if taskset is None:
        if rules is None:
            raise click.UsageError("Missing option '--taskset' (or --rules/--pool, whose held-out set is taken)")
        if rules.heldout_cid is None:
            raise click.UsageError("the pool rules name no held-out set (heldout_cid): pass --taskset")
        taskset, what = rules.heldout_cid, "the rules' heldout_cid"
    try:
        if Path(taskset).is_file():
            ts = TaskSet.load(Path(taskset))
        else:
            try:
                ts = TaskSet.from_bytes(open_ipfs(ipfs_spec).cat(taskset, max_size=256 << 20), name=taskset)
            except IntellectError as exc:
                raise click.UsageError(f"{what} {taskset!r} is no file and not fetchable from {ipfs_spec}: {exc}") from None
    except TaskSetError as exc:
        raise click.UsageError(str(exc)) from None
    tasks = list(ts)[:max_tasks] if max_tasks else list(ts)
    result = evaluate_checkpoint(model_dir, tasks, max_tokens=settings["max_tokens"],
                                 length_alpha=settings["length_alpha"], length_scope=settings["length_scope"],
                                 task_set=ts.name, device=device, chat_template=settings["chat_template"])
    if rules is not None:
        result = result.model_copy(update={"rules_cid": rules.cid()})
    if as_json:
        click.echo(result.model_dump_json())
    else:
        under = f" under rules {rules.cid()}" if rules is not None else ""
        click.echo(f"{model_dir} (step {result.step if result.step is not None else '-'}) on {ts.name}{under}: "
                   f"pass@1 {result.pass_at_1:.3f}  mean reward {result.mean_reward:.3f}  "
                   f"({result.tasks} tasks, {result.mean_completion_tokens:.1f} tokens/completion, "
                   f"{result.seconds:.1f}s)")


if __name__ == "__main__":
    main()
