"""dApp-style stake management through brownie.

Usage (amounts in INTL tokens, decimals allowed; the sender is the node's owner):
    brownie run stake status <node>                  # registry status, stake, unbonding, open challenges
    brownie run stake balance [<address>]            # token balance (default: the sender)
    brownie run stake stake <node> <amount>          # approve + stake (anyone may fund a node)
    brownie run stake request_unstake <node> <amount>
    brownie run stake withdraw <node>
    brownie run stake claim_rewards <submissionId> [<submissionId> ...]
    brownie run stake faucet                         # dev/test deployments only

Sender: accounts[0] on development; else STAKER_PRIVATE_KEY or STAKER_KEYSTORE(+_PASSWORD) (never printed).
Contracts: deployments/<chainId>.json (INTELLECT_DEPLOYMENTS_DIR to change the folder).
Every revert is decoded from the contracts' custom errors into a sentence saying what to do.
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import brownie
from brownie import Contract, accounts, chain, network, web3
from brownie.exceptions import VirtualMachineError

from intellect.sdk import REVERT_MESSAGES as MESSAGES
from intellect.sdk import Deployment, DeploymentError  # the deployment file's one model
from scripts.export_abi import ABI_DIR

ROOT = Path(__file__).resolve().parent.parent
TOKEN = 10**18
ROLES = ["none", "worker", "validator", "trainer", "relay"]
STATUSES = ["none", "active", "exited"]

class StakeScriptError(Exception):
    """A user mistake or a decoded revert, printed as one clear line."""


def explain(exc: VirtualMachineError) -> str:
    """A sentence for a reverted call, from the custom error brownie decoded."""
    msg = exc.revert_msg or str(exc)
    name, _, rest = msg.partition(":")
    args = [a.strip() for a in rest.split(",")] if rest.strip() else []
    template = MESSAGES.get(name.strip())
    if template is None:
        return f"reverted: {msg}"
    try:
        return template.format(*args)
    except IndexError:
        return f"{template} ({msg})"


def _deployment() -> Deployment:
    folder = Path(os.environ.get("INTELLECT_DEPLOYMENTS_DIR", ROOT / "deployments"))
    path = folder / f"{web3.eth.chain_id}.json"
    if not path.exists():
        raise StakeScriptError(f"no deployment file {path}; run `brownie run deploy` on this network first")
    return Deployment.read(path)


def _contract(d: Deployment, name: str) -> Any:
    import json

    abi = json.loads((ABI_DIR / f"{name}.json").read_text())["abi"]
    return Contract.from_abi(name, d.contracts[name].address, abi)


def _sender() -> Any:
    if network.show_active().startswith("development"):
        return accounts[0]
    if key := os.environ.get("STAKER_PRIVATE_KEY"):
        return accounts.add(key)
    if keystore := os.environ.get("STAKER_KEYSTORE"):
        return accounts.load(keystore, os.environ.get("STAKER_KEYSTORE_PASSWORD"))
    raise StakeScriptError("set STAKER_PRIVATE_KEY or STAKER_KEYSTORE to send from a live network")


def _amount(text: str) -> int:
    try:
        value = Decimal(text)
    except InvalidOperation as exc:
        raise StakeScriptError(f"amount {text!r} is not a number (tokens, e.g. 100 or 2.5)") from exc
    if value <= 0:
        raise StakeScriptError(f"amount {text!r} must be more than 0")
    return int(value * TOKEN)


def _address(text: str) -> str:
    if not web3.is_address(text):
        raise StakeScriptError(f"{text!r} is not an address (0x + 40 hex digits)")
    return web3.to_checksum_address(text)


def _fmt(wei: int) -> str:
    return f"{Decimal(wei) / TOKEN:f} INTL"


def _run(fn, *args) -> Any:
    try:
        return fn(*args)
    except VirtualMachineError as exc:
        raise StakeScriptError(explain(exc)) from None
    except (DeploymentError, ValueError) as exc:
        raise StakeScriptError(str(exc)) from None


def _main(action) -> Any:
    try:
        return action()
    except StakeScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)


def status(node: str) -> dict:
    """Registry status and stake of `node`."""

    def go():
        d = _deployment()
        reg, sm = _contract(d, "NodeRegistry"), _contract(d, "StakeManager")
        addr = _address(node)
        owner, role, st = reg.nodeCore(addr)
        s = sm.stakeOf(addr)
        info = {
            "node": addr, "owner": owner, "role": ROLES[role], "status": STATUSES[st],
            "active": int(s[0]), "unbonding": int(s[1]), "releaseAt": int(s[2]), "openChallenges": int(s[3]),
            "minStake": int(sm.minStake(role)), "now": chain.time(),
        }
        print(f"node {addr}: {info['status']} {info['role']}, owner {owner}")
        print(f"  active {_fmt(info['active'])} (minimum {_fmt(info['minStake'])}), unbonding {_fmt(info['unbonding'])}"
              f" releasing at {info['releaseAt']}, open challenges {info['openChallenges']}")
        return info

    return _main(go)


def balance(address: str | None = None) -> int:
    """Token balance of `address` (default: the sender)."""

    def go():
        token = _contract(_deployment(), "IntellectToken")
        who = _address(address) if address else _sender().address
        value = int(token.balanceOf(who))
        print(f"{who}: {_fmt(value)}")
        return value

    return _main(go)


def stake(node: str, amount: str) -> None:
    """Approves and stakes `amount` tokens on `node`."""

    def go():
        d = _deployment()
        token, sm = _contract(d, "IntellectToken"), _contract(d, "StakeManager")
        sender, addr, wei = _sender(), _address(node), _amount(amount)
        if int(token.allowance(sender, sm.address)) < wei:
            _run(token.approve, sm.address, wei, {"from": sender})
        _run(sm.stake, addr, wei, {"from": sender})
        print(f"staked {_fmt(wei)} on {addr}")

    _main(go)


def request_unstake(node: str, amount: str) -> None:
    """Moves `amount` of active stake to the node's single unbonding entry."""

    def go():
        sm = _contract(_deployment(), "StakeManager")
        tx = _run(sm.requestUnstake, _address(node), _amount(amount), {"from": _sender()})
        ev = tx.events["UnstakeRequested"][0]
        print(f"unbonding {_fmt(ev['totalUnbonding'])}, withdrawable from unix time {ev['releaseAt']}")

    _main(go)


def withdraw(node: str) -> None:
    """Withdraws the released unbonding stake of `node` to its owner."""

    def go():
        sm = _contract(_deployment(), "StakeManager")
        tx = _run(sm.withdraw, _address(node), {"from": _sender()})
        ev = tx.events["Withdrawn"][0]
        print(f"withdrew {_fmt(ev['amount'])} to {ev['to']}")

    _main(go)


def claim_rewards(*submission_ids: str) -> None:
    """Claims the rewards of finalised submissions (paid to the node's owner)."""

    def go():
        try:
            ids = [int(i) for i in submission_ids]
        except ValueError as exc:
            raise StakeScriptError(f"submission ids must be integers, got {submission_ids}") from exc
        ledger = _contract(_deployment(), "TaskLedger")
        tx = _run(ledger.claimRewards, ids, {"from": _sender()})
        print(f"claimed {_fmt(tx.return_value)} for {len(ids)} submission(s)")

    _main(go)


def faucet() -> None:
    """Drips faucet tokens to the sender (dev/test deployments)."""

    def go():
        token = _contract(_deployment(), "IntellectToken")
        tx = _run(token.drip, {"from": _sender()})
        print(f"received {_fmt(tx.events['FaucetDripped'][0]['amount'])}")

    _main(go)


def main() -> None:
    print(__doc__)


__all__ = ["balance", "brownie", "claim_rewards", "explain", "faucet", "request_unstake", "stake", "status", "withdraw"]
