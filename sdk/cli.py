"""`intellect`: the operator CLI over the SDK.

    intellect account new --keystore me.json          # password from INTELLECT_KEYSTORE_PASSWORD(_FILE)
    intellect --keystore me.json faucet               # dev chains: tokens (and gas) for the account
    intellect --keystore me.json node register --role worker --gpu-model H100-80GB --gpu-count 8
    intellect --keystore me.json stake deposit 100
    intellect --keystore me.json stake status

Every option also reads an environment variable (INTELLECT_NETWORK, INTELLECT_RPC_URL,
INTELLECT_KEYSTORE, INTELLECT_DEPLOYMENT, ...). Human output by default, `--json` for scripts.
Errors are one line on stderr; exit codes: 2 user error (bad input, config, keystore, content over
--max-size), 3 network error (RPC, IPFS node, content that fails its hash), 4 contract revert.
Other parts add subcommands through `PLUGINS` (lazy imports) or the `intellect.cli` entry point group.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from pydantic import BaseModel

from . import devnet as _devnet
from ._accounts import create_keystore, dev_account, import_keystore, load_keystore, read_password
from ._config import DEV_CHAIN_IDS, load_deployment, resolve_network
from ._errors import (
    ConfigError,
    ContentTooLargeError,
    ContractRevert,
    IntellectError,
    IpfsError,
    RpcError,
    SchemaVersionError,
)
from ._models import PoolParams, format_tokens, parse_tokens
from ._reverts import REVERT_HINTS
from .ipfs import EmbeddedIpfs, IpfsGateway, compute_cid, open_ipfs
from .ipfs._unixfs import CHUNK_SIZE, DagBuilder
from .network import load_network, sign_network, write_network
from .peers import pool_gateways
from .poolrules import PROBLEM_ORDERS, PoolRules, PoolRulesError

__all__ = ["EXIT_NETWORK", "EXIT_REVERT", "EXIT_USER", "PLUGINS", "cli", "main"]

EXIT_USER = 2
EXIT_NETWORK = 3
EXIT_REVERT = 4

# name -> "module:attribute" of a click command, imported only when that command runs
PLUGINS: dict[str, str] = {
    "shardcast": "intellect.sdk.shardcast.cli:shardcast",
    "dashboard": "intellect.sdk.dashboard.cli:dashboard",
}
# (the verifier's `taskset` group comes through the `intellect.cli` entry point group: pyproject.toml)


class _Ctx:
    def __init__(self, **kw: Any) -> None:
        self.opts = kw
        self.json: bool = kw["as_json"]
        self._protocol: Any = None

    def protocol(self, *, need_account: bool = True) -> Any:
        if self._protocol is None:
            from ._client import Protocol  # deferred: web3 (`intellect --help` stays fast)

            o = self.opts
            self._protocol = Protocol.connect(
                o["network"], rpc_url=o["rpc_url"], deployment=o["deployment"], keystore=o["keystore"],
                password_file=o["password_file"], dev_account_index=o["dev_account"], max_fee_gwei=o["max_fee_gwei"],
                descriptor=o["descriptor"],
            )
        if need_account and self._protocol.account is None:
            raise ConfigError("this command signs a transaction: pass --keystore FILE (or --dev-account N on a "
                              "local chain)")
        return self._protocol


def _out(ctx: _Ctx, data: Any, human: Callable[[], list[str]] | str) -> None:
    if ctx.json:
        if isinstance(data, BaseModel):
            click.echo(data.model_dump_json())
        elif isinstance(data, list) and all(isinstance(d, BaseModel) for d in data):
            click.echo(json.dumps([json.loads(d.model_dump_json()) for d in data]))
        else:
            click.echo(json.dumps(data, default=str))
        return
    lines = human() if callable(human) else human if isinstance(human, list) else [human]
    for ln in lines:
        click.echo(ln)


def _tok(wei: int) -> str:
    return f"{format_tokens(wei)} INTL"


def _amount(value: str) -> int:
    try:
        return parse_tokens(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _when(ts: int) -> str:
    import datetime as dt

    return "-" if not ts else dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class IntellectGroup(click.Group):
    """A group that also offers PLUGINS and `intellect.cli` entry points, imported on use."""

    plugins: dict[str, str] = PLUGINS
    entry_point_group = "intellect.cli"

    def _plugin_targets(self, name: str | None = None) -> dict[str, str]:
        """name -> target of the plugins; with `name` a built-in, without reading package metadata
        (every `intellect shardcast fetch` process would pay for the entry-point scan)."""
        targets = {}
        for n, target in self.plugins.items():
            if importlib.util.find_spec(target.split(":")[0].rsplit(".", 1)[0]) is not None:
                targets[n] = target
        if name is not None and name in targets:
            return targets
        try:
            from importlib.metadata import entry_points

            for ep in entry_points(group=self.entry_point_group):
                targets.setdefault(ep.name, ep.value)
        except Exception:  # broken metadata must not break the CLI
            pass
        return targets

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._plugin_targets()))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        target = self._plugin_targets(name).get(name)
        if target is None:
            return None
        module, _, attr = target.partition(":")
        try:
            return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
        except (ImportError, AttributeError) as exc:
            raise click.ClickException(f"the `{name}` command is unavailable: {exc}") from None


@click.group(cls=IntellectGroup, context_settings={"auto_envvar_prefix": "INTELLECT", "help_option_names": ["-h", "--help"]})
@click.option("--network", "-n", default="development", show_default=True,
              help="development | base-sepolia | base-mainnet, or an RPC URL.")
@click.option("--rpc-url", default=None, help="RPC URL (overrides the network's default).")
@click.option("--deployment", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Deployment file (default: deployments/<chainId>.json).")
@click.option("--descriptor", default=None,
              help="The network's one name: URL or path of its signed descriptor (intellect.network/v1), which "
                   "gives the RPC URLs and the deployment (`intellect network show`).")
@click.option("--keystore", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Encrypted keystore of the account that signs.")
@click.option("--password-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File holding the keystore password (else INTELLECT_KEYSTORE_PASSWORD).")
@click.option("--dev-account", type=int, default=None, help="Use anvil's dev account N (local chains only).")
@click.option("--max-fee-gwei", type=float, default=None, help="Cap on the fee per gas, in gwei.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON output.")
@click.option("-v", "--verbose", count=True, help="-v info logs, -vv debug.")
@click.pass_context
def cli(ctx: click.Context, verbose: int, **kw: Any) -> None:
    """Operate a node of the intellect network: accounts, nodes, stake, pools, rewards."""
    logging.basicConfig(level=[logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)],
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    ctx.obj = _Ctx(**kw)


# -- account ------------------------------------------------------------------------------------
@cli.group(short_help="Create or import an encrypted keystore.")
def account() -> None:
    """Keystores are eth-account scrypt JSON files; the password comes from INTELLECT_KEYSTORE_PASSWORD,
    INTELLECT_KEYSTORE_PASSWORD_FILE / --password-file, or a prompt."""


def _new_password(ctx: _Ctx) -> str:
    try:
        return read_password(None, ctx.opts["password_file"])
    except ConfigError:
        if not sys.stdin.isatty():
            raise
        return str(click.prompt("Keystore password", hide_input=True, confirmation_prompt=True))


@account.command("new", short_help="Create a new key in an encrypted keystore.")
@click.pass_obj
def account_new(ctx: _Ctx) -> None:
    """Create a new random key, encrypted into --keystore PATH (never overwritten)."""
    path = ctx.opts["keystore"]
    if path is None:
        raise ConfigError("account new needs --keystore PATH (where to write the keystore)")
    acct = create_keystore(path, _new_password(ctx))
    _out(ctx, {"address": acct.address, "keystore": str(path)}, f"created {acct.address} in {path}")


@account.command("import", short_help="Encrypt an existing private key into a keystore.")
@click.option("--key-file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="File holding the hex private key (else read from stdin).")
@click.pass_obj
def account_import(ctx: _Ctx, key_file: Path | None) -> None:
    """Read a hex private key (from --key-file or stdin, never from the command line) into --keystore PATH."""
    path = ctx.opts["keystore"]
    if path is None:
        raise ConfigError("account import needs --keystore PATH (where to write the keystore)")
    if key_file is not None:
        key = key_file.read_text().strip()
    elif sys.stdin.isatty():
        key = click.prompt("Private key (hex)", hide_input=True)
    else:
        key = sys.stdin.readline().strip()
    acct = import_keystore(path, key, _new_password(ctx))
    _out(ctx, {"address": acct.address, "keystore": str(path)}, f"imported {acct.address} into {path}")


# -- faucet -------------------------------------------------------------------------------------
@cli.command(short_help="Dev networks: tokens (and gas on anvil) for the account.")
@click.pass_obj
def faucet(ctx: _Ctx) -> None:
    """Drip the token faucet to the account. On a local anvil chain the account's ETH for gas is topped
    up too (anvil_setBalance)."""
    p = ctx.protocol()
    if p.is_dev_chain and p.eth_balance() < 10**18:
        p.w3.provider.make_request("anvil_setBalance", [p.address, hex(100 * 10**18)])
    info = p.faucet_info()
    if not info.enabled:
        raise ConfigError(f"chain {p.chain_id} has no faucet: it exists only on dev and test networks")
    amount = p.drip()
    balance = p.balance_of()
    _out(ctx, {"address": p.address, "dripped": amount, "balance": balance},
         f"dripped {_tok(amount)} to {p.address}; balance {_tok(balance)}")


# -- node ---------------------------------------------------------------------------------------
class NodeGroup(IntellectGroup):
    """`intellect node`: its own commands plus those of the `intellect.cli.node` entry point group (the agents'
    `preflight`, which reads the hardware with torch and the verifier's class rule)."""

    plugins: dict[str, str] = {}  # noqa: RUF012 (read only)
    entry_point_group = "intellect.cli.node"


@cli.group(cls=NodeGroup, short_help="Register, show, exit or preflight a node.")
def node() -> None:
    """Nodes of the NodeRegistry. A node key proves control by signing its registration (EIP-712)."""


def _node_lines(n: Any) -> list[str]:
    return [f"node       {n.address}", f"owner      {n.owner}", f"role       {n.role.name.lower()}",
            f"status     {n.status.name.lower()}", f"hardware   {n.gpu_count} x {n.gpu_model} ({n.vram_gib} GiB)",
            f"endpoint   {n.endpoint or '-'}", f"registered {_when(n.registered_at)}"]


@node.command("register", short_help="Register a node owned by this account.")
@click.option("--role", type=click.Choice(["worker", "validator", "trainer", "relay"]), required=True)
@click.option("--gpu-model", default="cpu", show_default=True, help="Declared GPU model, e.g. H100-80GB.")
@click.option("--vram-gib", type=click.IntRange(0, 65535), default=0, show_default=True)
@click.option("--gpu-count", type=click.IntRange(0, 65535), default=0, show_default=True)
@click.option("--endpoint", default="", help="URI where the node serves (relay URL, worker API).")
@click.option("--node-keystore", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Keystore of a separate node key (default: the account itself is the node).")
@click.pass_obj
def node_register(ctx: _Ctx, role: str, gpu_model: str, vram_gib: int, gpu_count: int, endpoint: str,
                  node_keystore: Path | None) -> None:
    """Register a node (the node key signs, this account sends and owns)."""
    p = ctx.protocol()
    node_acct = load_keystore(node_keystore, password_file=ctx.opts["password_file"]) if node_keystore else None
    n = p.register_node(role, node_account=node_acct, gpu_model=gpu_model, vram_gib=vram_gib, gpu_count=gpu_count,
                        endpoint=endpoint)
    _out(ctx, n, lambda: ["registered", *_node_lines(n)])


@node.command("show", short_help="Show a node (default: this account).")
@click.argument("address", required=False)
@click.pass_obj
def node_show(ctx: _Ctx, address: str | None) -> None:
    """Show a node's registry record."""
    p = ctx.protocol(need_account=address is None)
    n = p.node(address)
    _out(ctx, n, lambda: _node_lines(n))


@node.command("rotate-key", short_help="Move a node to a new key (owner only; recovers a lost key).")
@click.argument("address", required=False)
@click.option("--new-keystore", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=True,
              help="Keystore of the new node key (its password from --password-file or the environment).")
@click.pass_obj
def node_rotate_key(ctx: _Ctx, address: str | None, new_keystore: Path) -> None:
    """Move node ADDRESS (default: this account) to the key in --new-keystore. This account must own the node;
    the old key is not needed. The new key takes over the registration, stake, unbonding and record; the old
    key is retired for good; its pending rewards stay claimable (`intellect rewards claim --node OLD`)."""
    p = ctx.protocol()
    old = address or p.address
    new_acct = load_keystore(new_keystore, password_file=ctx.opts["password_file"])
    n = p.rotate_node_key(old, new_node_account=new_acct)
    _out(ctx, {"old": old, "new": n.address, "node": json.loads(n.model_dump_json())},
         lambda: [f"rotated {old} -> {n.address}", *_node_lines(n),
                  f"restart the node's agents with the new keystore; claim the old key's rewards with "
                  f"`intellect rewards claim --node {old}`"])


@node.command("exit", short_help="Take a node out of the network.")
@click.argument("address", required=False)
@click.pass_obj
def node_exit(ctx: _Ctx, address: str | None) -> None:
    """Exit a node (its stake stays slashable until withdrawn after unbonding)."""
    p = ctx.protocol()
    rc = p.exit_node(address)
    n = p.node(address)
    _out(ctx, n, lambda: [f"exited {n.address} (tx {rc.tx_hash})"])


# -- stake --------------------------------------------------------------------------------------
@cli.group(short_help="Deposit, unstake, withdraw and inspect stake.")
def stake() -> None:
    """Stake per node in the StakeManager. Amounts are in INTL (e.g. 100 or 12.5; `1000wei` for wei)."""


def _stake_lines(s: Any) -> list[str]:
    ok = {True: "yes", False: "NO", None: "-"}[s.meets_minimum]
    return [f"node         {s.node}", f"active       {_tok(s.active)}",
            f"minimum      {_tok(s.min_stake) if s.min_stake is not None else '-'} (met: {ok})",
            f"unbonding    {_tok(s.unbonding)}", f"release at   {_when(s.release_at)}",
            f"challenges   {s.open_challenges} open"]


_node_opt = click.option("--node", "node_addr", default=None, help="Node address (default: this account).")


@stake.command("deposit", short_help="Add stake to a node.")
@click.argument("amount")
@_node_opt
@click.option("--permit/--approve", default=False, help="Approve with an EIP-2612 permit (one transaction).")
@click.pass_obj
def stake_deposit(ctx: _Ctx, amount: str, node_addr: str | None, permit: bool) -> None:
    """Stake AMOUNT INTL on a node (approving the StakeManager as needed)."""
    wei = _amount(amount)
    p = ctx.protocol()
    target = node_addr or p.address
    s = p.stake_with_permit(target, wei) if permit else p.stake(target, wei)
    _out(ctx, s, lambda: [f"staked {_tok(wei)}", *_stake_lines(s)])


@stake.command("unstake", short_help="Start unbonding stake.")
@click.argument("amount")
@_node_opt
@click.pass_obj
def stake_unstake(ctx: _Ctx, amount: str, node_addr: str | None) -> None:
    """Move AMOUNT from active stake into unbonding (released after the unbonding period)."""
    wei = _amount(amount)
    p = ctx.protocol()
    s = p.request_unstake(node_addr or p.address, wei)
    _out(ctx, s, lambda: [f"unbonding {_tok(wei)} more", *_stake_lines(s)])


@stake.command("withdraw", short_help="Withdraw released stake.")
@_node_opt
@click.pass_obj
def stake_withdraw(ctx: _Ctx, node_addr: str | None) -> None:
    """Pay the released unbonding stake to the node's owner."""
    p = ctx.protocol()
    amount = p.withdraw(node_addr or p.address)
    _out(ctx, {"withdrawn": amount}, f"withdrew {_tok(amount)}")


@stake.command("status", short_help="Show a node's stake.")
@_node_opt
@click.pass_obj
def stake_status(ctx: _Ctx, node_addr: str | None) -> None:
    """Show active, unbonding and minimum stake of a node."""
    p = ctx.protocol(need_account=node_addr is None)
    s = p.stake_of(node_addr)
    _out(ctx, s, lambda: _stake_lines(s))


# -- pool ---------------------------------------------------------------------------------------
@cli.group(short_help="Create, fund and inspect pools, checkpoints and submissions.")
def pool() -> None:
    """Pools of the TaskLedger: each carries its rules (intellect.poolrules/v1) by CID."""


def _budget_items(items: tuple[str, ...]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        try:
            lengths = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            lengths = []
        if not sep or not name.strip() or not lengths:
            raise click.BadParameter(f"{item!r}: expected CLASS=N[,N...], e.g. cpu=64,128", param_hint="--budget")
        out[name.strip()] = lengths
    return out


def _publish_file(store: Any, path_or_cid: str | None, what: str, dry_run: bool,
                  check: Callable[[Path, bytes], None]) -> str | None:
    """A document's CID for `pool create`: a file is checked (`check` raises naming what is wrong) and added to
    `store` byte for byte (only its CID computed on a dry run); anything else is taken as a CID."""
    if path_or_cid is None:
        return None
    path = Path(path_or_cid)
    if not path.is_file():
        return path_or_cid
    data = path.read_bytes()
    check(path, data)
    cid = compute_cid(data) if dry_run else store.add(data)
    click.echo(f"{what} {path}: {cid}", err=True)
    return str(cid)


def _taskset_cid(store: Any, path_or_cid: str | None, what: str, dry_run: bool) -> str | None:
    """A task set's CID (`_publish_file`): a file must be as `intellect taskset convert|split` wrote it."""

    def check(path: Path, data: bytes) -> None:
        if not data.startswith(b'{"name":') and b'"schema": "intellect.taskset/' not in data[:512]:
            raise ConfigError(f"{what} {path} is not an intellect.taskset/v1 JSONL file (convert it with "
                              f"`intellect taskset convert`, or publish it with `intellect taskset publish` and pass "
                              f"the CID)")

    return _publish_file(store, path_or_cid, what, dry_run, check)


EVIDENCE_RULES_SCHEMA = "intellect.evidence-rules/v1"
MAX_EVIDENCE_RULES_BYTES = 256 * 1024  # the verifier's limit (`intellect.verifier.evidence`); a real one is ~3 KB


def _evidence_rules_cid(store: Any, path_or_cid: str | None, dry_run: bool) -> str | None:
    """`pool create --evidence-rules` (`_publish_file`): a file as `bench_evidence.py rules` writes it. Its schema
    and size are checked here; its content by every validator that reads it (`EvidenceRules.from_bytes`)."""

    def check(path: Path, data: bytes) -> None:
        if len(data) > MAX_EVIDENCE_RULES_BYTES:
            raise PoolRulesError(f"--evidence-rules {path}: {len(data)} bytes, over the {MAX_EVIDENCE_RULES_BYTES} "
                                 f"validators read")
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise PoolRulesError(f"--evidence-rules {path}: not a JSON document: {exc}") from exc
        if not isinstance(doc, dict) or doc.get("schema") != EVIDENCE_RULES_SCHEMA:
            got = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise PoolRulesError(f"--evidence-rules {path}: schema {str(got)[:80]!r}, expected "
                                 f"{EVIDENCE_RULES_SCHEMA!r} (write one with `bench/verifier/bench_evidence.py rules`)")

    return _publish_file(store, path_or_cid, "evidence rules", dry_run, check)


@pool.command("create", short_help="Publish a pool's rules to IPFS and create the pool on-chain.")
@click.option("--rules", "rules_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A rules document (JSON) to start from; the options below override its fields.")
@click.option("--taskset", default=None, help="Training task set: a file (added to IPFS) or its CID. Required unless --rules gives it.")
@click.option("--heldout", default=None, help="Held-out task set: a file (added to IPFS) or its CID.")
@click.option("--model-family", default=None, help="Model family, e.g. smollm2-135m. Required unless --rules gives it.")
@click.option("--chat-template", type=click.Choice(["model", "none"]), default=None,
              help="model: prompts in the checkpoint's chat template; none: bare text.")
@click.option("--group-size", type=int, default=None, help="Completions per problem. Required unless --rules gives it.")
@click.option("--problems-per-task", type=int, default=None, help="Problems per claimed task. Required unless --rules gives it.")
@click.option("--budget", "budgets", multiple=True, metavar="CLASS=N[,N...]",
              help="Thinking budgets of a hardware class (cpu, gpu-small, gpu-large); repeat per class. "
                   "A cpu=... entry is required unless --rules gives the budgets.")
@click.option("--length-alpha", type=float, default=None,
              help="Length-penalty coefficient α (0 turns the length term off; below 1/largest budget)."
                   " Required unless --rules gives it.")
@click.option("--length-scope", type=click.Choice(["solved", "all"]), default=None,
              help="Completions the length penalty applies to: solved (task reward > 0) or all "
                   "(default: solved, or the --rules document's).")
@click.option("--problem-order", type=click.Choice(PROBLEM_ORDERS), default=None,
              help="How a claim's problems are chosen: epochs (its slot in seeded shuffled passes over the task "
                   "set, every problem once per pass), random (drawn from the claim's seed) or adaptive (drawn "
                   "from the claim's seed, weighted by the solve rates the trainer publishes with each checkpoint: "
                   "online difficulty filtering) (default: epochs, or the --rules document's).")
@click.option("--temperature", type=float, default=None, help="Sampling temperature.")
@click.option("--toploc-profile", type=click.Choice(["mixed", "fp32", "reference"]), default=None,
              help="verification profile (default mixed: bf16 and fp32 workers; fp32: exact, all nodes in fp32)")
@click.option("--evidence-rules", default=None,
              help="Per-worker evidence rules calibrated on this pool's model (intellect.evidence-rules/v1): a file "
                   "(added to IPFS) or its CID (default: the rules shipped for the TOPLOC profile).")
@click.option("--max-units", type=int, default=None,
              help="Most work units (completion tokens) per submission (default: largest budget × group × problems).")
@click.option("--trainer", "trainer_addr", default=None, help="Trainer address (default: this account).")
@click.option("--reward-per-unit", default="0.001", show_default=True, help="Tokens paid per work unit.")
@click.option("--challenge-bond", default="10", show_default=True, help="Tokens a challenger bonds.")
@click.option("--slash", "slash_amount", default="50", show_default=True, help="Tokens an upheld challenge slashes.")
@click.option("--window", type=int, default=None,
              help="Challenge window, seconds (default: 86400; 300 on a development chain).")
@click.option("--vote-period", type=int, default=None,
              help="Vote period, seconds (default: 21600; 120 on a development chain).")
@click.option("--lease", type=int, default=None, help="Task lease, seconds (default: 3600; 600 on a development chain). "
              "Lease + window + vote period must stay below the chain's stake unbonding period.")
@click.option("--async-level", type=int, default=2, show_default=True)
@click.option("--quorum", type=int, default=None,
              help="Validator quorum: votes an upheld challenge needs and attestations a trainable submission needs "
                   "(default: 1 on a development chain, else the ledger's floor and at least 2).")
@click.option("--assigned-validators", type=int, default=None,
              help="Validators the chain assigns to each submission; only theirs count (default: quorum + 1).")
@click.option("--fund", "fund_amount", default=None, help="Tokens to fund the pool with right away.")
@click.option("--ipfs", "ipfs_spec", default="embedded:data/ipfs", show_default=True, envvar="INTELLECT_IPFS",
              help="Where the rules (and task-set files) are added: embedded:/path or kubo:http://host:5001.")
@click.option("--dry-run", is_flag=True, help="Check and print the rules and their CID; publish nothing.")
@click.pass_obj
def pool_create(ctx: _Ctx, rules_file: Path | None, taskset: str | None, heldout: str | None, model_family: str | None,
                chat_template: str | None, group_size: int | None, problems_per_task: int | None,
                budgets: tuple[str, ...], length_alpha: float | None, length_scope: str | None,
                problem_order: str | None, temperature: float | None, toploc_profile: str | None,
                evidence_rules: str | None, max_units: int | None, trainer_addr: str | None, reward_per_unit: str,
                challenge_bond: str, slash_amount: str, window: int | None, vote_period: int | None,
                lease: int | None, async_level: int,
                quorum: int | None, assigned_validators: int | None, fund_amount: str | None, ipfs_spec: str,
                dry_run: bool) -> None:
    """Build the pool's rules (intellect.poolrules/v1), refuse them if they contradict themselves, add
    them to IPFS and create the pool with their CID on-chain (the rules name the task set).

    Required unless a --rules document gives them: --taskset, --model-family, --group-size,
    --problems-per-task, --budget cpu=..., --length-alpha."""
    doc = _rules_document(rules_file) if rules_file is not None else {}
    store = open_ipfs(ipfs_spec)
    doc.setdefault("schema", "intellect.poolrules/v1")
    model = dict(doc.get("model") or {})
    sampler = dict(doc.get("sampler") or {})
    if model_family is not None:
        model["family"] = model_family
    if chat_template is not None:
        model["chat_template"] = chat_template
    if temperature is not None:
        sampler["temperature"] = temperature
    doc["model"], doc["sampler"] = model, sampler
    for key, value in (("group_size", group_size), ("problems_per_task", problems_per_task),
                       ("length_alpha", length_alpha), ("length_scope", length_scope),
                       ("problem_order", problem_order), ("toploc_profile", toploc_profile)):
        if value is not None:
            doc[key] = value
    if budgets:
        doc["budgets"] = _budget_items(budgets)
    if assigned_validators is not None:
        doc["assigned_validators"] = assigned_validators
    for key, cid in (("taskset_cid", _taskset_cid(store, taskset, "task set", dry_run)),
                     ("heldout_cid", _taskset_cid(store, heldout, "held-out set", dry_run)),
                     ("evidence_rules_cid", _evidence_rules_cid(store, evidence_rules, dry_run))):
        if cid is not None:
            doc[key] = cid
    given = {**doc, "model": doc["model"].get("family"), "budgets": (doc.get("budgets") or {}).get("cpu")}
    missing = [opt for key, opt in _REQUIRED_RULES if given.get(key) is None]
    if missing:
        raise PoolRulesError(f"pool create needs {', '.join(missing)} (or a --rules document that gives "
                             f"{'it' if len(missing) == 1 else 'them'})")
    if max_units is not None:
        doc["max_units_per_submission"] = max_units
    elif "max_units_per_submission" not in doc:  # an honest full-length submission, as the rules count it
        doc["max_units_per_submission"] = PoolRules.default_max_units(doc, source="pool rules")
    rules = PoolRules.build_new(doc, source="pool rules")
    data = rules.to_bytes()
    if dry_run:
        _out(ctx, {"rules": json.loads(data), "rules_cid": rules.cid()}, [data.decode(), f"rules CID {rules.cid()}"])
        return
    p = ctx.protocol()
    if quorum is None:
        quorum = default_quorum(p)
    window, vote_period, lease = pool_timing(p, window, vote_period, lease)
    if rules.assigned_validators is not None and rules.assigned_validators < quorum:
        raise PoolRulesError(f"assigned_validators {rules.assigned_validators} is below the quorum {quorum}: "
                             f"no submission could ever be trained on")
    cid = store.add(data)
    if cid != rules.cid():
        raise PoolRulesError(f"IPFS {ipfs_spec} stored the rules as {cid}, expected {rules.cid()}")
    params = PoolParams(trainer=trainer_addr or p.address, rules_cid=cid,
                        reward_per_unit=parse_tokens(reward_per_unit), challenge_bond=parse_tokens(challenge_bond),
                        slash_amount=parse_tokens(slash_amount), window_length=window, vote_period=vote_period,
                        lease_duration=lease, max_units_per_submission=rules.max_units_per_submission,
                        async_level=async_level, quorum=quorum)
    pool_id = p.create_pool(params)
    created = p.fund_pool(pool_id, parse_tokens(fund_amount)) if fund_amount else p.pool(pool_id)
    _out(ctx, {"pool_id": pool_id, "rules_cid": cid, "taskset_cid": rules.taskset_cid,
               "heldout_cid": rules.heldout_cid, "budget": created.budget},
         [f"pool {pool_id} created: rules {cid}", f"  task set {rules.taskset_cid}"
          + (f"  held-out {rules.heldout_cid}" if rules.heldout_cid else ""),
          f"  budget {_tok(created.budget)}"])


def _rules_document(rules_file: Path) -> dict[str, Any]:
    """`pool create --rules FILE`: the document the options then complete or override."""
    try:
        doc = json.loads(rules_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PoolRulesError(f"--rules {rules_file}: not a readable JSON document: {exc}") from exc
    if not isinstance(doc, dict):
        raise PoolRulesError(f"--rules {rules_file}: a rules document is a JSON object")
    return PoolRules.as_stored(doc)  # a published document (`pool show`, `to_bytes`) means what it meant there


_REQUIRED_RULES = (("taskset_cid", "--taskset"), ("model", "--model-family"), ("group_size", "--group-size"),
                   ("problems_per_task", "--problems-per-task"), ("budgets", "--budget cpu=..."),
                   ("length_alpha", "--length-alpha"))
"""The rules fields `pool create` cannot default, and the option that gives each."""

DEV_TIMING = (300, 120, 600)
"""`pool create`'s window, vote period and lease on a development chain: the devnet's default pool's (they fit
its 1 h stake unbonding period)."""
NET_TIMING = (24 * 3600, 6 * 3600, 3600)
"""... and elsewhere (Base: 24 h minimum window, 7 days unbonding)."""


def pool_timing(protocol: Any, window: int | None, vote_period: int | None, lease: int | None) -> tuple[int, int, int]:
    """`pool create`'s window, vote period and lease: those given, the others defaulted for the chain; a
    `ConfigError` naming the three and the chain's unbonding period when their sum does not stay below it (the
    ledger's `TaskLedgerUnbondingTooShort(exposure, unbondingPeriod)`)."""
    dw, dv, dl = DEV_TIMING if protocol.is_dev_chain else NET_TIMING
    window, vote_period, lease = (dw if window is None else window, dv if vote_period is None else vote_period,
                                  dl if lease is None else lease)
    unbonding = protocol.unbonding_period()
    exposure = window + vote_period + lease
    if exposure >= unbonding:
        raise ConfigError(f"--lease {lease} + --window {window} + --vote-period {vote_period} = {exposure} s must stay "
                          f"below this chain's stake unbonding period, {unbonding} s (a worker unbonding right after "
                          f"a claim must stay slashable): shorten them")
    return window, vote_period, lease


def default_quorum(protocol: Any) -> int:
    """`pool create`'s quorum when none is given: 1 on a development chain; elsewhere the ledger's floor and never
    below 2 (`intellect.verifier.assignment.NON_DEV_MIN_QUORUM`: the trainer would not train on fewer)."""
    return 1 if protocol.is_dev_chain else max(2, protocol.pool_bounds()[1])


@pool.command("fund", short_help="Add tokens to a pool's budget.")
@click.argument("pool_id", type=int)
@click.argument("amount")
@click.pass_obj
def pool_fund(ctx: _Ctx, pool_id: int, amount: str) -> None:
    """Escrow AMOUNT tokens into POOL_ID's budget (approves the ledger first if needed)."""
    pl = ctx.protocol().fund_pool(pool_id, _amount(amount))
    _out(ctx, pl, f"pool {pool_id}: budget {_tok(pl.budget)}, reserved {_tok(pl.reserved)}")


@pool.command("validator-pay", short_help="Show or set what a pool pays its validators (AttesterBook).")
@click.argument("pool_id", type=int)
@click.option("--per-attestation", default=None, help="Set, once, the reward per attestation the trainer used (owner).")
@click.option("--per-challenge", default=None,
              help="Set, once, the reward per resolved challenge, shared by its winning side by stake; below the "
                   "pool's challenge bond (owner).")
@click.option("--fund", "fund_amount", default=None, help="Escrow this much more for both (anyone).")
@click.pass_obj
def pool_validator_pay(ctx: _Ctx, pool_id: int, per_attestation: str | None, per_challenge: str | None,
                       fund_amount: str | None) -> None:
    """POOL_ID's validator pay: the reward per attestation the trainer used (per assignment slot), the reward per
    resolved challenge for the voters on its winning side (issue 33), and the budget both are paid from. Each
    reward is set once, by the pool's owner; anyone funds."""
    changing = any(v is not None for v in (per_attestation, per_challenge, fund_amount))
    p = ctx.protocol(need_account=changing)
    if per_attestation is not None:
        p.set_attester_reward(pool_id, _amount(per_attestation))
    if per_challenge is not None:
        p.set_voter_reward(pool_id, _amount(per_challenge))
    if fund_amount is not None:
        p.fund_attester_rewards(pool_id, _amount(fund_amount))
    rule = p.attester_pool_rule(pool_id)
    doc = {"pool_id": pool_id, "reward_per_attestation": rule.reward_per_attestation,
           "reward_per_challenge": p.voter_reward(pool_id), "budget": rule.budget}
    _out(ctx, doc, f"pool {pool_id}: {_tok(doc['reward_per_attestation'])} per attestation, "
                   f"{_tok(doc['reward_per_challenge'])} per resolved challenge, budget {_tok(rule.budget)}")


@pool.command("defund", short_help="Take unreserved tokens out of a pool's budget (pool owner).")
@click.argument("pool_id", type=int)
@click.argument("amount")
@click.option("--to", "to_addr", default=None, help="Recipient (default: this account).")
@click.option("--announce", is_flag=True, help="Only announce the defund (executable one lease duration later).")
@click.pass_obj
def pool_defund(ctx: _Ctx, pool_id: int, amount: str, to_addr: str | None, announce: bool) -> None:
    """Withdraw AMOUNT unreserved tokens from POOL_ID's budget (announced with --announce at least one lease
    duration before)."""
    if announce:
        at = ctx.protocol().announce_defund(pool_id, _amount(amount))
        _out(ctx, {"pool_id": pool_id, "executable_at": at}, f"pool {pool_id}: defund announced, executable at {at}")
        return
    pl = ctx.protocol().defund_pool(pool_id, _amount(amount), to_addr)
    _out(ctx, pl, f"pool {pool_id}: budget {_tok(pl.budget)}, reserved {_tok(pl.reserved)}")


@pool.command("state", short_help="Show, pause, resume or finish a pool (issue 37).")
@click.argument("pool_id", type=int)
@click.argument("action", type=click.Choice(["show", "pause", "resume", "finish"]), default="show")
@click.pass_obj
def pool_state(ctx: _Ctx, pool_id: int, action: str) -> None:
    """POOL_ID's state: open (claims taken while its trainer is alive), paused, finished, or stalled (its
    trainer's heartbeat lapsed). pause / resume: the pool's owner; finish: its owner or trainer, anyone once it
    stalled (the unreserved budget goes back to the owner; submitted work is still paid)."""
    p = ctx.protocol(need_account=action != "show")
    if action != "show":
        p.set_pool_state(pool_id, {"pause": "paused", "resume": "open", "finish": "finished"}[action])
    st = p.pool_state(pool_id)
    until = f" (claims taken until {_when(st.open_until)})" if st.open_until > 2 else ""
    _out(ctx, st, f"pool {pool_id}: {st.state.name.lower()}{until}")


@pool.command("show", short_help="Show one pool or all pools.")
@click.argument("pool_id", type=int, required=False)
@click.option("--rules", "show_rules", is_flag=True,
              help="Also fetch and show the pool's rules document (needs POOL_ID): from the network, i.e. the IPFS "
                   "gateways of the pool's trainer, relays and validators, or from --ipfs.")
@click.option("--ipfs", "ipfs_spec", default=None, envvar="INTELLECT_IPFS",
              help="Resolve the pool's rules from this IPFS (embedded:/path, with the pool's peers, or kubo:URL); "
                   "implies --rules.")
@click.pass_obj
def pool_show(ctx: _Ctx, pool_id: int | None, show_rules: bool, ipfs_spec: str | None) -> None:
    """Show a pool's parameters, budget and latest checkpoint (all pools without POOL_ID); with --rules (or
    --ipfs) and POOL_ID, its rules document too, fetched from any of the pool's listed peers (issue 36: the pool
    stays readable while its trainer is down, from its relays' and validators' copies)."""
    p = ctx.protocol(need_account=False)
    pools = [p.pool(pool_id)] if pool_id is not None else p.pools()
    if (show_rules or ipfs_spec) and pool_id is None:
        raise click.UsageError("--rules and --ipfs show one pool's rules: give its POOL_ID")
    if (show_rules or ipfs_spec) and pool_id is not None:
        cid = pools[0].params.rules_cid
        with tempfile.TemporaryDirectory(prefix="intellect-pool-") as scratch:
            data = _pool_ipfs(p, pool_id, ipfs_spec, Path(scratch)).cat(cid, max_size=1 << 20)
        rules = PoolRules.from_bytes(data, source=cid)
        # every rule with its meaning, also those the canonical bytes leave out (`length_scope: all`,
        # `problem_order: random`: documents made before those fields)
        shown = rules.model_dump(mode="json", by_alias=True, exclude_none=True)
        doc = {"pool": json.loads(pools[0].model_dump_json()), "rules": shown}
        _out(ctx, doc, [f"pool {pool_id}  rules {cid}", json.dumps(doc["rules"], indent=2, sort_keys=True)])
        return

    def human() -> list[str]:
        out = []
        for pl in pools:
            pr = pl.params
            out += [f"pool {pl.pool_id}  owner {pl.owner}  trainer {pr.trainer}",
                    f"  rules / task set {pr.rules_cid}",
                    f"  reward {_tok(pr.reward_per_unit)}/unit  budget {_tok(pl.budget)}  reserved {_tok(pl.reserved)}",
                    f"  window {pr.window_length}s  vote {pr.vote_period}s  lease {pr.lease_duration}s  "
                    f"async level {pr.async_level}  quorum {pr.quorum}",
                    f"  bond {_tok(pr.challenge_bond)}  slash {_tok(pr.slash_amount)}  "
                    f"latest step {pl.latest_step if pl.latest_step is not None else '-'}"]
        return out or ["no pools"]

    _out(ctx, pools if pool_id is None else pools[0], human)


def _pool_ipfs(p: Any, pool_id: int, spec: str | None, scratch: Path) -> Any:
    """Where a pool's documents are read from: `spec` (Kubo as it is; an embedded store with the pool's peers), else
    an embedded store in `scratch` whose peers are the gateways of the pool's trainer, relays and validators
    (`intellect.sdk.peers.pool_gateways`)."""
    if spec and not spec.startswith("embedded:") and "://" in spec:
        return open_ipfs(spec)
    peers = pool_gateways(p, pool_id)
    if not peers and not spec:
        raise IpfsError(f"no peer of pool {pool_id} serves its documents (its trainer, relays and listed validators "
                        f"are unreachable or name no IPFS gateway); give --ipfs kubo:URL or embedded:/path")
    if spec:
        return open_ipfs(spec, peers=peers)
    return EmbeddedIpfs(scratch, peers=peers)


@pool.command("checkpoints", short_help="List a pool's published checkpoints.")
@click.argument("pool_id", type=int)
@click.pass_obj
def pool_checkpoints(ctx: _Ctx, pool_id: int) -> None:
    """Every CheckpointPublished of POOL_ID, oldest first."""
    p = ctx.protocol(need_account=False)
    cps = p.checkpoints(pool_id)
    _out(ctx, cps, lambda: [f"step {c.step:>6}  {c.manifest_cid}  block {c.block_number}" for c in cps]
         or ["no checkpoints"])


@pool.command("submissions", short_help="List a pool's work submissions.")
@click.argument("pool_id", type=int)
@click.option("--node", "node_addr", default=None, help="Only this worker node's submissions.")
@click.pass_obj
def pool_submissions(ctx: _Ctx, pool_id: int, node_addr: str | None) -> None:
    """WorkSubmitted events of POOL_ID with each submission's current status."""
    p = ctx.protocol(need_account=False)
    subs = p.submissions(pool_id=pool_id, node=node_addr)

    def human() -> list[str]:
        return [f"#{s.submission_id:<6} {s.node}  step {s.policy_step}  units {s.work_units}  "
                f"reward {_tok(s.reward)}  {s.status.name.lower() if s.status else '-'}  window end "
                f"{_when(s.window_end)}  {s.rollouts_cid}" for s in subs] or ["no submissions"]

    _out(ctx, subs, human)


# -- rewards ------------------------------------------------------------------------------------
@cli.group(short_help="Show and claim work rewards.")
def rewards() -> None:
    """Rewards of finalised submissions (window closed, not successfully challenged)."""


@rewards.command("status", short_help="Claimable and pending rewards of a node.")
@_node_opt
@click.pass_obj
def rewards_status(ctx: _Ctx, node_addr: str | None) -> None:
    p = ctx.protocol(need_account=node_addr is None)
    r = p.rewards(node_addr)
    # when each pending reward becomes claimable: its challenge window's end (if no challenge is upheld)
    ends = {s.submission_id: s.window_end for s in p.submissions(node=r.node, with_status=False)
            if s.submission_id in set(r.pending_ids)} if r.pending_ids else {}
    if ctx.json:
        _out(ctx, {**json.loads(r.model_dump_json()), "claimable_at": ends}, "")
        return
    _out(ctx, r, lambda: [f"node       {r.node}", f"claimable  {_tok(r.claimable)} ({len(r.claimable_ids)} submissions)",
                          f"pending    {_tok(r.pending)} ({len(r.pending_ids)} in window or challenged)",
                          *[f"  #{i:<6} claimable from {_when(ends[i])} unless challenged" for i in sorted(ends)],
                          f"paid       {_tok(r.paid)}"])


@rewards.command("claim", short_help="Claim every claimable reward of a node.")
@_node_opt
@click.pass_obj
def rewards_claim(ctx: _Ctx, node_addr: str | None) -> None:
    """Claim all finalised rewards; they are paid to the node's owner."""
    p = ctx.protocol()
    r = p.rewards(node_addr)
    paid = p.claim_rewards(r.claimable_ids)
    _out(ctx, {"paid": paid, "submissions": r.claimable_ids},
         f"claimed {_tok(paid)} for {len(r.claimable_ids)} submissions" if paid else "nothing claimable yet")


def _root_hex(text: str) -> str:
    """A Merkle root as the SDK writes it (0x + 64 lower-case hex digits), or a BadParameter naming it."""
    t = text.strip().lower().removeprefix("0x")
    if len(t) != 64 or any(c not in "0123456789abcdef" for c in t):
        raise click.BadParameter(f"{text!r} is not a root: 0x and 64 hex digits", param_hint="--root")
    return "0x" + t


@rewards.command("roots", short_help="A pool's attestation roots and what each still reserves.")
@click.argument("pool_id", type=int)
@click.pass_obj
def rewards_roots(ctx: _Ctx, pool_id: int) -> None:
    """Every AttestationRootRecorded of POOL_ID (one a trained step: the validators' pay for the attestations the
    trainer used), with what each root still reserves: leaves neither paid to their validators nor released."""
    roots = ctx.protocol(need_account=False).attestation_roots(pool_id)
    _out(ctx, roots, lambda: [f"{r.root}  {r.leaf_count} leaves  total {_tok(r.total)}  reserved "
                              f"{_tok(r.remaining)}  block {r.block_number}  {r.leaves_cid}" for r in roots]
         or ["no attestation roots"])


@rewards.command("release-leaves", short_help="Give back to a pool the root leaves that can never be paid.")
@click.argument("pool_id", type=int)
@click.option("--root", "only_root", default=None, help="Only this root (0x + 64 hex digits).")
@click.option("--dry-run", is_flag=True, help="Only list what would be released.")
@click.option("--ipfs", "ipfs_spec", default=None, envvar="INTELLECT_IPFS",
              help="Where the leaves files are read: kubo:URL or embedded:/path (default: a scratch store "
                   "fetching from the pool's trainer, relays and validators).")
@click.pass_obj
def rewards_release_leaves(ctx: _Ctx, pool_id: int, only_root: str | None, dry_run: bool,
                           ipfs_spec: str | None) -> None:
    """Return to POOL_ID's validator budget the attestation leaves of work upheld as bad or voided, which no
    validator can ever be paid (anyone may; the pool's trainer does it too): each root that still reserves
    something, its leaves file fetched by the CID its event names and checked against the root, one transaction
    per root and validator (256 leaves at most)."""
    p = ctx.protocol(need_account=not dry_run)
    want = None if only_root is None else _root_hex(only_root)
    roots = [r for r in p.attestation_roots(pool_id) if r.remaining and want in (None, r.root)]
    if want is not None and not roots:
        raise click.BadParameter(f"pool {pool_id} has no recorded root {want} that still reserves anything",
                                 param_hint="--root")
    done: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="intellect-roots-") as scratch:
        store = _pool_ipfs(p, pool_id, ipfs_spec, Path(scratch)) if roots else None
        files = [(r, p.attestation_root_file(r, store)) for r in roots]
    for r, f in files:
        for validator, indices in p.unpayable_attester_leaves(f).items():
            for i in range(0, len(indices), p.ROOT_LEAVES_PER_CALL):
                part = indices[i:i + p.ROOT_LEAVES_PER_CALL]
                amount = sum(f.leaves[j].amount for j in part)
                if not dry_run:
                    amount = p.release_attester_leaves(f, validator, part)
                done.append({"root": r.root, "validator": validator, "leaves": part, "amount": amount})
    total = sum(d["amount"] for d in done)
    verb = "would release" if dry_run else "released"
    _out(ctx, {"dry_run": dry_run, "released": total, "batches": done},
         lambda: [f"{d['root'][:18]}...  {d['validator']}  {len(d['leaves'])} leaves  {_tok(d['amount'])}"
                  for d in done] + [f"{verb} {_tok(total)} in {len(done)} transaction(s)" if done
                                    else "nothing to release"])


# -- devnet / deploy ----------------------------------------------------------------------------
@cli.command(short_help="Run a local anvil chain with the contracts deployed.")
@click.option("--port", type=int, default=8545, show_default=True, help="anvil's port.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address anvil listens on: 0.0.0.0 for a chain other hosts join (a dev chain: its accounts' keys "
                   "are public, so only on a network you trust).")
@click.option("--deployments", "deployments_dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path("deployments"), show_default=True, help="Where <chainId>.json is written.")
@click.option("--state", "state_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Keep the chain in this file across restarts (anvil --state).")
@click.pass_obj
def devnet(ctx: _Ctx, port: int, host: str, deployments_dir: Path, state_file: Path | None) -> None:
    """Start anvil on HOST:PORT, deploy the contracts shipped in this package (dev parameters: faucet, default
    pool 1 with quorum 1 and a 300 s window) and serve until Ctrl-C. Other shells then use the default network;
    other hosts pass --rpc-url http://THIS-HOST:PORT and a copy of the deployment file (--deployment)."""
    import signal
    import time

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop anvil on SIGTERM too
    anvil = _devnet.Anvil(port=port, state_file=state_file, host=host).start()
    try:
        dep_file = deployments_dir / "31337.json"
        if state_file is not None and state_file.exists() and dep_file.exists():
            dep = load_deployment(path=dep_file)
        else:
            dep = _devnet.deploy(anvil.url, deployments_dir.resolve())
        listen = f"{host}:{anvil.port}"
        _out(ctx, {"rpc_url": anvil.url, "listen": listen, "deployment": str(dep_file),
                   "contracts": {k: v.address for k, v in dep.contracts.items()}},
             lambda: [f"anvil      {anvil.url} (chain {dep.chain_id}; listening on {listen})",
                      f"deployment {dep_file}",
                      *[f"{k:<15}{v.address}" for k, v in dep.contracts.items()],
                      "dev accounts: --dev-account 0..9 (0 = deployer, admin, default pool trainer); Ctrl-C stops"])
        while anvil.proc is not None and anvil.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        anvil.stop()


@cli.command("deploy", short_help="Deploy the contracts onto a running chain (the package's bytecode).")
@click.option("--profile", type=click.Choice(["development", "base-sepolia", "base-mainnet"]), default=None,
              help="Deploy parameters (default: development on a dev chain; required elsewhere).")
@click.option("--params", "params_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A DeployParams JSON file (overrides --profile).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("deployments"),
              show_default=True, help="Where <chainId>.json is written (only once the deploy checked out).")
@click.pass_obj
def deploy(ctx: _Ctx, profile: str | None, params_file: Path | None, out_dir: Path) -> None:
    """Deploy and wire IntellectToken, NodeRegistry, StakeManager, TaskLedger and AttesterBook onto the chain at
    --network/--rpc-url, signed by --keystore (or --dev-account on a dev chain), and write the deployment file
    other nodes need. On a dev chain it also mints to the deployer and creates and funds the default pool."""
    from web3 import Web3  # deferred, with the two below: web3 (`intellect --help` stays fast)

    from ._tx import RetryPolicy, redact_url, with_retries
    from .deploy import deploy_contracts, params_for_network

    o = ctx.opts
    spec, url = resolve_network(o["network"], o["rpc_url"])
    w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": 30}, exception_retry_configuration=None))
    chain_id = int(with_retries(lambda: w3.eth.chain_id, RetryPolicy(), f"connect to {redact_url(url)}"))
    if spec is not None and spec.chain_id != chain_id:
        raise ConfigError(f"{redact_url(url)} is chain {chain_id}, not {spec.name} ({spec.chain_id}): check --rpc-url")
    dev = chain_id in DEV_CHAIN_IDS
    if o["keystore"] is not None:
        account = load_keystore(o["keystore"], password_file=o["password_file"])
    elif o["dev_account"] is not None and dev:
        account = dev_account(o["dev_account"])
    else:
        raise ConfigError("deploy signs transactions: pass --keystore FILE (or --dev-account N on a dev chain)")
    if params_file is None and profile is None and not dev:
        raise ConfigError(f"chain {chain_id} is not a dev chain: choose --profile base-sepolia|base-mainnet or "
                          "--params FILE (the parameters are permanent)")
    params = params_for_network(profile or "development", params_file)
    dep = deploy_contracts(w3, account, params, dev=dev, network=profile or ("development" if dev else ""),
                           out_dir=out_dir, max_fee_gwei=o["max_fee_gwei"])
    path = out_dir / f"{dep.chain_id}.json"
    _out(ctx, {"deployment": str(path), "chain_id": dep.chain_id,
               "contracts": {k: v.address for k, v in dep.contracts.items()},
               "default_pool_id": dep.default_pool_id},
         lambda: [f"deployed on chain {dep.chain_id}: {path}",
                  *[f"{k:<15}{v.address}" for k, v in dep.contracts.items()],
                  *([f"default pool   {dep.default_pool_id}"] if dep.default_pool_id is not None else [])])


# -- network descriptor -------------------------------------------------------------------------
@cli.group("network", short_help="Sign or check the network's descriptor (its one name for joiners).")
def network_group() -> None:
    """A joiner needs one thing: the URL of the network's signed descriptor (`--descriptor URL`), which names
    the chain, its RPC URLs and the deployment. The deployer signs it; nodes refuse one its signer did not."""


@network_group.command("sign", short_help="Write the signed descriptor of the deployment (deployer only).")
@click.option("--name", required=True, help="The network's name (1-64 characters).")
@click.option("--public-rpc-url", "rpc_urls", multiple=True, required=True,
              help="An RPC URL joiners use (repeat; tried in order). Required.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help="Where the descriptor is written. Required.")
@click.pass_obj
def network_sign(ctx: _Ctx, name: str, rpc_urls: tuple[str, ...], out_file: Path) -> None:
    """Sign the descriptor of the deployment at --network/--rpc-url/--deployment with --keystore (the
    deployer's; --dev-account 0 on a devnet) and write it to --out. Publish its bytes at a URL (or add them to
    IPFS: the CID printed is the one `ipfs add --cid-version 1 --raw-leaves` gives) and hand out that URL."""
    p = ctx.protocol()
    desc = sign_network(p.deployment, name=name, rpc_urls=list(rpc_urls), account=p.account)
    write_network(desc, out_file)
    cid = compute_cid(desc.to_bytes())
    _out(ctx, {"descriptor": str(out_file), "cid": cid, "name": name, "chain_id": desc.chain_id,
               "signer": desc.signer},
         [f"network {name!r} (chain {desc.chain_id}) signed by {desc.signer}: {out_file}", f"cid {cid}"])


@network_group.command("show", short_help="Check a descriptor and the chain it names.")
@click.argument("src", required=False)
@click.pass_obj
def network_show(ctx: _Ctx, src: str | None) -> None:
    """Fetch SRC (a URL or path; default --descriptor), check its signature, connect to its first RPC URL that
    answers and check that its signer is the admin of the network's token there."""
    src = src or ctx.opts["descriptor"]
    if not src:
        raise click.UsageError("give the descriptor's URL or path (or --descriptor)")
    desc = load_network(src)
    ctx.opts["descriptor"] = desc
    p = ctx.protocol(need_account=False)
    dep = desc.deployment
    _out(ctx, {"name": desc.name, "chain_id": desc.chain_id, "rpc_url": p.rpc_url, "rpc_urls": desc.rpc_urls,
               "signer": desc.signer, "issued_at": desc.issued_at, "default_pool_id": dep.default_pool_id,
               "contracts": {k: v.address for k, v in dep.contracts.items()}},
         lambda: [f"network {desc.name!r}: chain {desc.chain_id}, signed by {desc.signer} (the token's admin) "
                  f"at {_when(desc.issued_at)}",
                  f"rpc        {p.rpc_url} (of {len(desc.rpc_urls)})",
                  *[f"{k:<15}{v.address}" for k, v in dep.contracts.items()],
                  *([f"default pool   {dep.default_pool_id}"] if dep.default_pool_id is not None else [])])


# -- ipfs ---------------------------------------------------------------------------------------
_DEFAULT_IPFS = "embedded:" + str(Path.home() / ".intellect" / "ipfs")
_ipfs_opt = click.option("--ipfs", "ipfs_spec", default=_DEFAULT_IPFS, show_default=True, envvar="INTELLECT_IPFS",
                         help="embedded:/path or kubo:http://host:5001.")
_peer_opt = click.option("--peer", "peers", multiple=True, help="Gateway URL to fetch missing blocks from (repeat).")


@cli.group(short_help="Add, fetch and serve content on IPFS (CIDs identical to Kubo's).")
def ipfs() -> None:
    """IPFS content as the protocol uses it: CIDv1, raw leaves, 256 KiB chunks, every block verified."""


@ipfs.command("cid", short_help="Print the CID of a file without storing it.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_obj
def ipfs_cid(ctx: _Ctx, path: Path) -> None:
    """The CID `ipfs add --cid-version 1 --raw-leaves` gives PATH."""
    builder = DagBuilder()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_SIZE):
            builder.add_chunk(chunk)
    cid = str(builder.finish().cid)
    _out(ctx, {"cid": cid, "size": path.stat().st_size}, cid)


@ipfs.command("add", short_help="Add a file; prints its CID.")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_ipfs_opt
@click.pass_obj
def ipfs_add(ctx: _Ctx, path: Path, ipfs_spec: str) -> None:
    """Store PATH (streamed in 256 KiB chunks) and pin it."""
    cid = open_ipfs(ipfs_spec).add_file(path)
    _out(ctx, {"cid": cid, "size": path.stat().st_size}, cid)


@ipfs.command("get", short_help="Fetch verified content to a file.")
@click.argument("cid")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), required=True)
@click.option("--max-size", default="1GiB", show_default=True, help="Refuse content larger than this (bytes, KiB, "
              "MiB, GiB).")
@_ipfs_opt
@_peer_opt
@click.pass_obj
def ipfs_get(ctx: _Ctx, cid: str, output: Path, max_size: str, ipfs_spec: str, peers: tuple[str, ...]) -> None:
    """Fetch CID (every block hash-checked) into OUTPUT, atomically."""
    import os
    import tempfile

    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    limit = _size(max_size)
    store: Any = open_ipfs(ipfs_spec, peers=list(peers))
    fd, tmp = tempfile.mkstemp(dir=output.parent if str(output.parent) else ".", prefix=".ipfs-get-")
    n = 0
    try:
        with os.fdopen(fd, "wb") as fh, Progress("[progress.description]{task.description}", BarColumn(),
                                                 DownloadColumn(), TransferSpeedColumn(), transient=True,
                                                 disable=ctx.json or not sys.stderr.isatty(),
                                                 console=None) as progress:
            task = progress.add_task(cid[:16] + "...", total=None)
            for piece in store.cat_iter(cid, max_size=limit):
                fh.write(piece)
                n += len(piece)
                progress.update(task, advance=len(piece))
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _out(ctx, {"cid": cid, "size": n, "path": str(output)}, f"{output}: {n} bytes, verified against {cid}")


@ipfs.command("serve", short_help="Serve an embedded store over HTTP (GET /ipfs/<cid>).")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              default=Path.home() / ".intellect" / "ipfs", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", type=int, default=8080, show_default=True)
@_peer_opt
@click.pass_obj
def ipfs_serve(ctx: _Ctx, data_dir: Path, host: str, port: int, peers: tuple[str, ...]) -> None:
    """Run the read-only gateway for the store in DATA_DIR until Ctrl-C."""
    gw = IpfsGateway(EmbeddedIpfs(data_dir, peers=list(peers)), host, port).start()
    click.echo(f"serving {data_dir} at {gw.url}/ipfs/<cid>", err=True)
    gw.serve_forever()


def _size(text: str) -> int:
    units = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "kb": 10**3, "mb": 10**6, "gb": 10**9, "b": 1}
    t = text.strip().lower()
    for suffix, mult in units.items():
        if t.endswith(suffix) and t[: -len(suffix)].strip().isdigit():
            return int(t[: -len(suffix)]) * mult
    if t.isdigit():
        return int(t)
    raise click.BadParameter(f"not a size: {text!r} (use e.g. 1048576, 10MiB, 1GiB)")


def _fail(code: int, msg: str) -> NoReturn:
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: maps SDK errors to one line and an exit code (2 user, 3 network, 4 revert)."""
    try:
        cli.main(args=argv, prog_name="intellect", standalone_mode=False)
    except click.exceptions.Abort:
        _fail(EXIT_USER, "aborted")
    except click.ClickException as exc:
        exc.show()
        sys.exit(EXIT_USER if isinstance(exc, click.UsageError) else exc.exit_code)
    except ContractRevert as exc:
        hint = REVERT_HINTS.get(exc.name)
        _fail(EXIT_REVERT, f"{exc}" + (f"; {hint}" if hint else ""))
    except (ConfigError, SchemaVersionError, ContentTooLargeError, ValueError) as exc:
        _fail(EXIT_USER, str(exc))
    except (RpcError, IpfsError) as exc:
        _fail(EXIT_NETWORK, str(exc))
    except IntellectError as exc:
        _fail(EXIT_USER, str(exc))


if __name__ == "__main__":  # pragma: no cover
    main()
