"""`intellect node preflight`: can this key join this pool in this role, and what would it earn?

    intellect --keystore node.json node preflight --pool 1 --role worker --endpoint http://203.0.113.7:8000

One screen of checks, each OK, WARN or FAIL with what to do: the key; gas money; token balance against the
stake the role needs; the registration; for a worker the budget class it would get now (the lower of its declared
class and the class its verified history earned, `intellect.verifier.budget_class`) and what raises it; the most a
submission can pay and the pool's budget left; the hardware (device, memory, dtype; tokens/s on a model with
`--measure MODEL`); the advertised endpoint (a loopback or private address is refused off dev chains, warned on
them); the trainer's and the relays' `/status` (short timeout); estimated earnings and costs per day at a stated
gas price; and when pending rewards become claimable.

Exit codes (for scripts): 0 ready (warnings allowed; `--strict` turns them into 6), 5 not ready (a check failed),
6 warnings under `--strict`; and the CLI's own: 2 user error, 3 network error.

Lives in the agents (it reads torch's view of the hardware and the verifier's class rule); the `intellect` CLI
offers it as `node preflight` through the `intellect.cli.node` entry point group.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import urlsplit

import click

from intellect.agents.hardware import resolve
from intellect.agents.models import load_model, load_tokenizer, smollm2_dir, tiny_model_dir
from intellect.sdk import NodeStatus, Role, WorkHistory, format_tokens
from intellect.sdk.http import fetch
from intellect.sdk.ipfs import open_ipfs
from intellect.sdk.poolrules import EMPTY_FILE_CID, PoolRules
from intellect.verifier.budget_class import (
    CLASSES,
    ClassRule,
    earned_class,
    hardware_class,
    lower_class,
    verified_rate,
)

__all__ = ["EXIT_NOT_READY", "EXIT_WARNINGS", "Check", "advertised_address_problem", "preflight"]

log = logging.getLogger(__name__)

EXIT_NOT_READY = 5
EXIT_WARNINGS = 6
ROLES = ("worker", "validator", "trainer", "relay")
# gas per transaction, from reports/gas.md (`make gas`, anvil, solc 0.8.37 optimizer 200 runs)
GAS = {"claimTask": 68_790, "submitWork": 84_911, "claimRewards": 68_318, "claimAttesterRewards": 105_275,
       "challenge": 139_551, "publishCheckpoint": 100_905, "recordAttestationRoot": 82_890}
OK, WARN, FAIL = "OK", "WARN", "FAIL"


@dataclass
class Check:
    name: str
    level: str
    detail: str
    fix: str = ""


@dataclass
class Report:
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def add(self, name: str, level: str, detail: str, fix: str = "") -> None:
        self.checks.append(Check(name, level, detail, fix))

    @property
    def worst(self) -> str:
        levels = {c.level for c in self.checks}
        return FAIL if FAIL in levels else WARN if WARN in levels else OK


def advertised_address_problem(endpoint: str) -> str | None:
    """Why `endpoint` cannot be reached from other hosts (loopback, private, link-local, unspecified; a name that
    resolves only to such addresses), or None."""
    try:
        host = urlsplit(endpoint).hostname
    except ValueError:
        return f"{endpoint!r} is not a URL"
    if not host:
        return f"{endpoint!r} names no host"
    try:
        addrs = [ipaddress.ip_address(host)]
    except ValueError:
        if host == "localhost" or host.endswith(".localhost"):
            return f"{host} is this host only"
        try:
            addrs = [ipaddress.ip_address(info[4][0]) for info in socket.getaddrinfo(host, None)]
        except OSError:
            return f"{host} does not resolve here"
    bad = [a for a in addrs if not a.is_global]  # loopback, private, link-local, shared (CGNAT), reserved
    if bad and len(bad) == len(addrs):
        a = bad[0]
        kind = ("loopback" if a.is_loopback else "unspecified" if a.is_unspecified else "link-local" if a.is_link_local
                else "private" if a.is_private else "non-public")
        return f"{host} is a {kind} address ({bad[0]}): other hosts cannot reach it"
    return None


def _status(url: str, timeout: float) -> tuple[dict[str, Any] | None, str]:
    from intellect.agents.roles._runtime import (
        parse_status,  # deferred: loads web3 (Protocol), not needed for --help
    )

    target = url.rstrip("/") + "/status"
    try:
        reply = fetch("GET", target, deadline=timeout, timeout=timeout, max_bytes=1 << 20)
        return parse_status(reply.body, target), ""
    except Exception as exc:  # unreachable, refused, slow, not a status document: all mean "not live"
        return None, f"{type(exc).__name__}: {str(exc)[:160]}"


def _when(ts: int) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _tok(wei: int) -> str:
    return f"{format_tokens(int(wei))} INTL"


def _rules(p: Any, cid: str, ipfs_spec: str | None, peers: list[str]) -> tuple[Any, str]:
    if cid == EMPTY_FILE_CID:
        return None, "the pool names no rules document (the empty file: a dev default pool, whose tasks and budgets " \
                     "come from the agents' configuration)"

    if not ipfs_spec and not peers:
        return None, "no IPFS and no live peer to fetch the rules from"
    import tempfile

    with tempfile.TemporaryDirectory(prefix="intellect-preflight-") as scratch:  # a store only for this read
        try:
            data = open_ipfs(ipfs_spec or f"embedded:{scratch}", peers=peers).cat(cid, max_size=1 << 20)
            return PoolRules.from_bytes(data, source=cid), ""
        except Exception as exc:
            return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def run_checks(p: Any, *, pool_id: int, role: str, endpoint: str | None, declared: tuple[str, int, int] | None,
               device: str, dtype: str, ipfs_spec: str | None, peers: list[str], gas_price_gwei: float | None,
               timeout: float, measure: str | None) -> Report:
    """Every check of `intellect node preflight`, in the order the report prints them."""
    rep = Report()
    dev = p.is_dev_chain
    me = p.address
    rep.facts.update(node=me, chain_id=p.chain_id, dev_chain=dev, pool=pool_id, role=role)
    rep.add("key", OK, f"{me} (chain {p.chain_id}{', a dev chain' if dev else ''})")
    gas_price, price_note = _gas_money(rep, p, role, gas_price_gwei)
    node = p.node(me)
    _stake(rep, p, role, node)
    _registration(rep, role, node)
    prm = _pool(rep, p, pool_id)
    live_peers = _trainer_and_relays(rep, p, role, prm, timeout)
    rules, why = _rules(p, prm.rules_cid, ipfs_spec, [*peers, *live_peers])
    if rules is None:
        rep.add("pool rules", WARN, f"{prm.rules_cid} not read ({why})",
                "" if why.startswith("the pool names no rules") else "pass --ipfs or --peer GATEWAY to read them")
    else:
        rep.add("pool rules", OK, f"{prm.rules_cid}: model {rules.model.family}, group {rules.group_size} x "
                f"{rules.problems_per_task} problems, budgets {dict(rules.budgets)}")
    units = None
    if role == "worker" and rules is not None:
        units = _budget_class(p, rep, pool_id, prm, rules, node, declared)
    _hardware(rep, role, device, dtype, measure)
    _reachability(rep, role, endpoint if endpoint is not None else node.endpoint, dev, timeout)
    _economics(rep, role, prm, rules, units, gas_price, price_note)
    _rewards(rep, p, pool_id, me)
    return rep


def _gas_money(rep: Report, p: Any, role: str, gas_price_gwei: float | None) -> tuple[int, str]:
    """The gas price the estimates use (and how it was chosen), and whether the node holds ETH for 50 task cycles."""
    dev = p.is_dev_chain
    if gas_price_gwei is None:
        block = p.w3.eth.get_block("latest")
        base = int(block.get("baseFeePerGas", 0) or 0)
        gas_price = 2 * base + 10**9 if not dev else max(base, 10**9)
        price_note = "2 x base fee + 1 gwei tip, now" if not dev else "1 gwei (dev chain)"
    else:
        gas_price = int(gas_price_gwei * 10**9)
        price_note = f"{gas_price_gwei:g} gwei, as given"
    rep.facts["gas_price_wei"] = gas_price
    eth = p.eth_balance()
    per_cycle = {"worker": GAS["claimTask"] + GAS["submitWork"], "validator": GAS["claimAttesterRewards"],
                 "trainer": GAS["publishCheckpoint"] + GAS["recordAttestationRoot"], "relay": 0}[role]
    need_eth = 50 * per_cycle * gas_price
    rep.add("gas money", OK if eth >= need_eth else (WARN if eth > 0 else FAIL),
            f"{eth / 1e18:.6f} ETH; about {need_eth / 1e18:.6f} ETH pays 50 task cycles at {price_note}",
            "" if eth >= need_eth else "send ETH for gas to the node's address" + (" (`intellect faucet`)" if dev else ""))
    return gas_price, price_note


def _stake(rep: Report, p: Any, role: str, node: Any) -> None:
    dev = p.is_dev_chain
    me = p.address
    st = p.stake_of(me)
    min_stake = p.min_stake(role)
    bal = p.balance_of()
    active = int(st.active)
    rep.facts.update(min_stake=min_stake, active_stake=active, token_balance=bal)
    if active >= min_stake:
        rep.add("stake", OK, f"active {_tok(active)} >= minimum {_tok(min_stake)} for {role}")
    elif bal + active >= min_stake:
        rep.add("stake", WARN, f"active {_tok(active)} < minimum {_tok(min_stake)}; balance {_tok(bal)} covers it",
                ("register first (below), then " if node.status == NodeStatus.NONE else "")
                + f"`intellect stake deposit {(min_stake - active) / 1e18:g}`")
    else:
        rep.add("stake", FAIL, f"active {_tok(active)} + balance {_tok(bal)} < minimum {_tok(min_stake)} for {role}",
                "get tokens" + (" (`intellect faucet`)" if dev else " (buy or receive INTL)"))


def _registration(rep: Report, role: str, node: Any) -> None:
    if node.status == NodeStatus.NONE:
        rep.add("registration", WARN, "not registered", f"`intellect node register --role {role} --endpoint URL`"
                " (the agent also registers itself when it starts)")
    elif node.role != Role.parse(role):
        rep.add("registration", FAIL, f"registered as {node.role.name.lower()}, not {role}",
                "use another key for this role")
    elif node.status != NodeStatus.ACTIVE:
        rep.add("registration", FAIL, f"{node.status.name.lower()}", "an exited node cannot rejoin: use a new key")
    else:
        rep.add("registration", OK, f"{role}, active, owner {node.owner}")


def _pool(rep: Report, p: Any, pool_id: int) -> Any:
    """The pool's budget and what one submission can pay; returns the pool's parameters."""
    pool = p.pool(pool_id)
    prm = pool.params
    left = int(pool.budget) - int(pool.reserved)
    rep.facts.update(budget=int(pool.budget), reserved=int(pool.reserved), reward_per_unit=prm.reward_per_unit)
    chain_cap = prm.reward_per_unit * prm.max_units_per_submission
    node_cap = int(pool.budget) * prm.max_reservation_bps // 10_000
    rep.add("pool", OK if left >= prm.reward_per_unit * 64 else WARN,
            f"pool {pool_id}: budget left {_tok(left)} of {_tok(pool.budget)}; a submission pays at most "
            f"{_tok(min(chain_cap, max(node_cap, 0)))} (reward {_tok(prm.reward_per_unit)}/unit x "
            f"{prm.max_units_per_submission} units; one node may reserve {prm.max_reservation_bps / 100:g}% of the "
            f"budget)", "" if left > 0 else "the pool is out of budget: wait for its owner to fund it")
    return prm


def _trainer_and_relays(rep: Report, p: Any, role: str, prm: Any, timeout: float) -> list[str]:
    """Whether the pool's trainer and the listed relays answer; returns the gateways live peers advertise."""
    from intellect.agents.roles._runtime import Directory, peer_service  # deferred: loads web3

    directory = Directory(p, timeout=timeout)
    live_peers: list[str] = []
    trainer = p.node(prm.trainer)
    if role != "trainer":
        if not trainer.endpoint:
            rep.add("trainer", FAIL if role in ("worker", "validator") else WARN,
                    f"{prm.trainer} advertises no endpoint", "ask the pool's trainer; nothing to fetch rules "
                    "or checkpoints from")
        else:
            doc, why = _status(trainer.endpoint, timeout)
            if doc is None:
                rep.add("trainer", FAIL if role in ("worker", "validator") else WARN,
                        f"{trainer.endpoint}/status did not answer within {timeout:g} s ({why})",
                        "the trainer is down or unreachable from here: try later")
            else:
                rep.add("trainer", OK, f"{trainer.endpoint} live (policy step {doc.get('policy_step', '-')}: "
                        f"{str(doc.get('doing', ''))[:80]})")
                if gw := peer_service(doc, "ipfs"):
                    live_peers.append(gw)
    relays = directory.by_role("relay")
    alive = 0
    for r in relays[:8]:
        if r.endpoint and _status(r.endpoint, timeout)[0] is not None:
            alive += 1
    if relays:
        rep.add("relays", OK if alive else WARN, f"{alive} of {min(len(relays), 8)} listed relay(s) answer /status")
    else:
        rep.add("relays", WARN if role in ("worker", "validator") else OK,
                "no relay is listed: checkpoints come from the trainer alone")
    return live_peers


def _reachability(rep: Report, role: str, ep: str, dev: bool, timeout: float) -> None:
    if not ep:
        rep.add("endpoint", OK if role == "worker" else WARN, "none advertised: outbound only",
                "" if role == "worker" else "validators and relays behind NAT: push to a pinned store, or "
                "advertise a public URL (server.public_url)")
    else:
        problem = advertised_address_problem(ep)
        if problem and not dev:
            rep.add("endpoint", FAIL, f"{ep}: {problem}", "advertise a public address (server.public_url) or "
                    "none (outbound only)")
        elif problem:
            rep.add("endpoint", WARN, f"{ep}: {problem} (allowed on a dev chain)")
        else:
            doc, why = _status(ep, timeout)
            rep.add("endpoint", OK if doc is not None else WARN,
                    f"{ep} " + ("answers /status from here" if doc is not None else f"does not answer from here ({why})"),
                    "" if doc is not None else "start the agent, open the port, or check the router's forwarding")


def _budget_class(p: Any, rep: Report, pool_id: int, prm: Any, rules: Any, node: Any,
                  declared: tuple[str, int, int] | None) -> int:
    gpu_model, vram, count = declared or (node.gpu_model or "cpu", node.vram_gib, node.gpu_count)
    decl = hardware_class(gpu_model, vram, count)
    rule = ClassRule.of(rules.class_history, rules.class_lease_share)
    thresholds = rule.thresholds(rules.budgets, rules.group_size, rules.problems_per_task, prm.lease_duration)
    head = p.block_number()
    history = WorkHistory(p, pool_id, lease_duration=prm.lease_duration, window_length=prm.window_length)
    outcomes = history.outcomes(p.address, head, limit=max(rule.history, 1)) if rule.history else []
    earned = earned_class(outcomes, thresholds, rule.history)
    cls = lower_class(decl, earned)
    rate = verified_rate(outcomes[-rule.history:]) if rule.history else 0.0
    nxt = CLASSES[CLASSES.index(cls) + 1] if cls != CLASSES[-1] else None
    if cls == decl:
        raise_it = "declare stronger hardware (it is then earned the same way)" if nxt else "the highest class"
    elif len(outcomes) < rule.history:
        raise_it = (f"{rule.history - len(outcomes)} more decided lease(s) (a full history of {rule.history}) at >= "
                    f"{thresholds.get(nxt or cls, 0):.2f} verified tokens per lease-second")
    else:
        raise_it = f"a verified rate >= {thresholds.get(nxt or cls, 0):.2f} tokens per lease-second (now {rate:.2f})"
    units = max(rules.budgets_for(cls)) * rules.group_size * rules.problems_per_task
    rep.facts.update(declared_class=decl, earned_class=earned, budget_class=cls, class_units=units)
    rep.add("budget class", OK, f"{cls} (declared {decl}, earned {earned} over {len(outcomes)} decided lease(s)); "
            f"budgets {rules.budgets_for(cls)}; to rise: {raise_it}")
    return units


def _hardware(rep: Report, role: str, device: str, dtype: str, measure: str | None) -> None:
    if role == "relay":
        rep.add("hardware", OK, "a relay runs no model")
        return
    try:
        placement = resolve(device, dtype, role)
    except Exception as exc:
        rep.add("hardware", FAIL, str(exc))
        return
    import torch

    if placement.device.startswith("cuda"):
        props = torch.cuda.get_device_properties(placement.device)
        mem = f"{props.name}, {props.total_memory / 2**30:.0f} GiB"
    else:
        try:
            import os

            pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            mem = f"{os.cpu_count()} CPU cores, {pages / 2**30:.0f} GiB RAM"
        except (OSError, ValueError):
            mem = "CPU"
    detail = f"{placement.device} ({mem}), {placement.dtype}"
    rep.facts.update(device=placement.device, dtype=placement.dtype)
    if measure:
        tps = _tokens_per_second(measure, placement)
        rep.facts["tokens_per_second"] = tps
        detail += f"; {tps:.1f} generated tokens/s on {measure}"
    rep.add("hardware", OK, detail, "" if measure else "--measure MODEL to time generation (slow)")


def _tokens_per_second(model: str, placement: Any) -> float:
    """Generated tokens per second (greedy, batch 4 x 32 new tokens) of `model` on `placement`: `tiny` (the agents'
    tiny Llama), `smollm2` (SmolLM2-135M) or a Hugging Face model directory."""
    import torch

    path = tiny_model_dir() if model == "tiny" else smollm2_dir() if model == "smollm2" else model
    mdl, tok = load_model(path, dtype=placement.dtype, device=placement.device), load_tokenizer(path)
    ids = tok(["The quick brown fox"] * 4, return_tensors="pt", padding=True).to(placement.device)
    t0 = time.perf_counter()
    with torch.no_grad():
        out = mdl.generate(**ids, max_new_tokens=32, min_new_tokens=32, do_sample=False,
                           pad_token_id=tok.pad_token_id)
    return float((out.shape[1] - ids["input_ids"].shape[1]) * out.shape[0] / (time.perf_counter() - t0))


def _economics(rep: Report, role: str, prm: Any, rules: Any, units: int | None, gas_price: int, note: str) -> None:
    day = 86_400
    if role == "worker":
        u = units or prm.max_units_per_submission
        tps = rep.facts.get("tokens_per_second")
        task_s = u / tps if tps else prm.lease_duration / 2
        tasks = day / max(task_s, 1.0)
        earn = min(tasks * u * prm.reward_per_unit, rep.facts["budget"] - rep.facts["reserved"])  # the pool pays no more
        gas = tasks * (GAS["claimTask"] + GAS["submitWork"]) + (day / max(prm.window_length, 1)) * GAS["claimRewards"]
        cost = gas * gas_price
        basis = f"{tps:.1f} tokens/s measured" if tps else "one full task per half lease (no --measure)"
        if units is None:
            basis += "; the pool's unit cap per task (its rules unread)"
        rep.facts.update(tasks_per_day=tasks, earnings_per_day_wei=int(earn), gas_cost_per_day_wei=int(cost))
        rep.add("per day (estimate)", OK if earn > 0 else WARN,
                f"~{tasks:.0f} tasks of {u} units ({basis}): earn up to {_tok(int(earn))} (capped by the budget left); gas "
                f"~{cost / 1e18:.6f} ETH at {note}; stake at risk per upheld challenge {_tok(prm.slash_amount)}; "
                f"pay after the {prm.window_length} s window (+{prm.vote_period} s vote if challenged)")
    elif role == "validator":
        # its attester claims: about one multiproof claim of a step's leaves per lease duration
        cost = (day / max(prm.lease_duration, 1)) * GAS["claimAttesterRewards"] * gas_price
        rep.add("per day (estimate)", OK,
                f"attestation rewards per the pool's AttesterBook rule; gas ~{cost / 1e18:.6f} ETH at {note}; a "
                f"challenge bonds {_tok(prm.challenge_bond)} (returned with a share of the slash when upheld)")
    else:
        rep.add("per day (estimate)", OK, f"the {role} earns nothing from the ledger directly; gas at {note}")


def _rewards(rep: Report, p: Any, pool_id: int, me: str) -> None:
    r = p.rewards(me)
    if not r.pending_ids and not r.claimable:
        rep.add("rewards", OK, f"nothing pending; paid so far {_tok(r.paid)}")
        return
    subs = {s.submission_id: s for s in p.submissions(node=me)}
    when = sorted((subs[i].window_end, i) for i in r.pending_ids if i in subs)
    shown = ", ".join(f"#{i} at {_when(t)}" for t, i in when[:5]) + (" ..." if len(when) > 5 else "")
    rep.facts["pending_claimable_at"] = {i: t for t, i in when}
    rep.add("rewards", OK, f"claimable now {_tok(r.claimable)} ({len(r.claimable_ids)}); pending {_tok(r.pending)}: "
            f"{shown or '-'} (if unchallenged)", "`intellect rewards claim`" if r.claimable else "")


@click.command("preflight", short_help="Check in one screen whether this key can join a pool in a role.")
@click.option("--pool", "pool_id", type=int, default=None, help="Pool id (default: the deployment's default pool).")
@click.option("--role", type=click.Choice(ROLES), required=True)
@click.option("--endpoint", default=None, help="The URL the node will advertise (default: the registry's).")
@click.option("--gpu-model", default=None, help="Declared GPU model (default: the registry's record).")
@click.option("--vram-gib", type=int, default=0)
@click.option("--gpu-count", type=int, default=0)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--dtype", default="auto", show_default=True, help="auto, fp32 or bf16.")
@click.option("--ipfs", "ipfs_spec", default=None, envvar="INTELLECT_IPFS",
              help="Where to read the pool's rules (embedded:/path or kubo:URL); the trainer's gateway is tried too.")
@click.option("--peer", "peers", multiple=True, help="An IPFS gateway to read the rules from (repeat).")
@click.option("--gas-price-gwei", type=float, default=None, help="Gas price for the cost estimate (default: now).")
@click.option("--timeout", type=float, default=3.0, show_default=True, help="Seconds per liveness check.")
@click.option("--measure", default=None, metavar="MODEL", help="Also time generation on MODEL (slow).")
@click.option("--strict", is_flag=True, help="Exit 6 when any check warns.")
@click.pass_obj
def preflight(ctx: Any, pool_id: int | None, role: str, endpoint: str | None, gpu_model: str | None, vram_gib: int,
              gpu_count: int, device: str, dtype: str, ipfs_spec: str | None, peers: tuple[str, ...],
              gas_price_gwei: float | None, timeout: float, measure: str | None, strict: bool) -> None:
    """Check key, balance, stake, registration, budget class, pool budget, hardware, reachability, trainer and
    relays, and estimate earnings and costs per day. Exit 0 ready, 5 not ready, 6 warnings (--strict)."""
    import sys

    p = ctx.protocol()
    pid = pool_id if pool_id is not None else (p.deployment.default_pool_id or 1)
    declared = (gpu_model, vram_gib, gpu_count) if gpu_model is not None else None
    rep = run_checks(p, pool_id=pid, role=role, endpoint=endpoint, declared=declared, device=device, dtype=dtype,
                     ipfs_spec=ipfs_spec, peers=list(peers), gas_price_gwei=gas_price_gwei, timeout=timeout,
                     measure=measure)
    verdict = {FAIL: "NOT READY", WARN: "ready, with warnings", OK: "ready"}[rep.worst]
    if ctx.json:
        click.echo(json.dumps({"verdict": verdict, "checks": [asdict(c) for c in rep.checks], "facts": rep.facts},
                              default=str))
    else:
        click.echo(f"preflight: {role} {rep.facts['node']} in pool {pid} on chain {rep.facts['chain_id']}")
        for c in rep.checks:
            click.echo(f"[{c.level:^4}] {c.name:<19} {c.detail}" + (f"\n       {'':<19} -> {c.fix}" if c.fix else ""))
        click.echo(f"verdict: {verdict}")
    if rep.worst == FAIL:
        sys.exit(EXIT_NOT_READY)
    if rep.worst == WARN and strict:
        sys.exit(EXIT_WARNINGS)
