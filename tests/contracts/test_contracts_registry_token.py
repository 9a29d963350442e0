"""NodeRegistry and IntellectToken: every function, custom error and event."""

from __future__ import annotations

from brownie import ZERO_ADDRESS as ZERO
from brownie import IntellectToken, accounts, chain
from contracts_helpers import (
    RELAY,
    TOKEN,
    TRAINER,
    VALIDATOR,
    WORKER,
    event,
    new_key_account,
    registration_signature,
    reverts,
)
from eth_account import Account

from scripts._eip712 import permit_signature


def _register(net, node, owner, role=WORKER, deadline=None, sig=None, gpu="H100", endpoint="http://n:1"):
    deadline = deadline or chain.time() + 600
    sig = sig or registration_signature(net.registry, node, owner.address, role, deadline)
    return net.registry.register(node, role, gpu, 80, 8, endpoint, deadline, sig, {"from": owner})


def test_register_self_signed(net):
    node = new_key_account("reg-self")
    tx = _register(net, node, node)
    assert event(tx, "NodeRegistered") == {
        "node": node, "owner": node, "role": WORKER, "gpuModel": "H100", "vramGiB": 80, "gpuCount": 8,
        "endpoint": "http://n:1",
    }
    info = net.registry.nodeInfo(node)
    assert info["owner"] == node and info["status"] == 1 and info["gpuModel"] == "H100"
    assert info["registeredAt"] == chain[tx.block_number].timestamp
    assert tuple(net.registry.nodeCore(node)) == (node.address, WORKER, 1)
    assert net.registry.ownerOf(node) == node
    assert net.registry.isActive(node, WORKER) and not net.registry.isActive(node, VALIDATOR)
    assert net.registry.activeCount(WORKER) == 1
    assert net.registry.nonces(node) == 1


def test_register_by_owner_with_node_signature(net):
    node = new_key_account("reg-owned")
    _register(net, node, accounts[3], role=RELAY)
    assert net.registry.ownerOf(node) == accounts[3]
    assert net.registry.activeCount(RELAY) == 1


def test_registrationDigest_matches_offchain_eip712(net):
    node = new_key_account("reg-digest")
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, node, accounts[3].address, TRAINER, deadline)
    digest = net.registry.registrationDigest(node, accounts[3], TRAINER, deadline)
    assert Account._recover_hash(bytes(digest), signature=sig) == node.address


def test_register_errors(net):
    node = new_key_account("reg-err")
    with reverts("NodeRegistryZeroAddress"):
        net.registry.register(ZERO, WORKER, "g", 1, 1, "e", chain.time() + 60, b"", {"from": node})
    with reverts("NodeRegistryInvalidRole", 0):
        _register(net, node, node, role=0, sig=b"\x00" * 65)
    past = chain.time() - 1
    with reverts("NodeRegistryExpiredSignature", past):
        _register(net, node, node, deadline=past)
    # signed for another owner: the recovered signer is not the node
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, node, accounts[4].address, WORKER, deadline)
    with reverts("NodeRegistryInvalidSignature", node):
        _register(net, node, accounts[3], deadline=deadline, sig=sig)
    with reverts("NodeRegistryInvalidSignature", node, ZERO):
        _register(net, node, node, sig=b"\x01" * 10)
    with reverts("NodeRegistryStringTooLong", "gpuModel", 65, 64):
        _register(net, node, node, gpu="x" * 65)
    with reverts("NodeRegistryStringTooLong", "endpoint", 257, 256):
        _register(net, node, node, endpoint="x" * 257)
    _register(net, node, node)
    with reverts("NodeRegistryAlreadyActive", node):
        _register(net, node, node)


def test_register_signature_cannot_be_replayed(net):
    node = new_key_account("reg-replay")
    deadline = chain.time() + 600
    sig = registration_signature(net.registry, node, node.address, WORKER, deadline)
    _register(net, node, node, deadline=deadline, sig=sig)
    net.registry.exit(node, {"from": node})
    with reverts("NodeRegistryInvalidSignature"):
        _register(net, node, node, deadline=deadline, sig=sig)
    _register(net, node, node)  # a fresh signature (next nonce) re-registers after exit
    assert net.registry.nonces(node) == 2


def test_update_and_exit(net):
    node = new_key_account("reg-upd")
    _register(net, node, accounts[3], role=VALIDATOR)
    with reverts("NodeRegistryNotOwner", node, node):
        net.registry.update(node, "A100", 40, 1, "http://x", {"from": node})
    tx = net.registry.update(node, "A100", 40, 1, "http://x", {"from": accounts[3]})
    assert event(tx, "NodeUpdated") == {"node": node, "gpuModel": "A100", "vramGiB": 40, "gpuCount": 1, "endpoint": "http://x"}
    assert net.registry.nodeInfo(node)["vramGiB"] == 40
    with reverts("NodeRegistryStringTooLong", "endpoint", 300, 256):
        net.registry.update(node, "A100", 40, 1, "x" * 300, {"from": accounts[3]})
    with reverts("NodeRegistryNotOwner", node, accounts[4]):
        net.registry.exit(node, {"from": accounts[4]})
    tx = net.registry.exit(node, {"from": accounts[3]})
    assert event(tx, "NodeExited") == {"node": node, "owner": accounts[3], "role": VALIDATOR}
    assert net.registry.activeCount(VALIDATOR) == 0
    assert net.registry.nodeCore(node)[2] == 2
    with reverts("NodeRegistryNotActive", node):
        net.registry.exit(node, {"from": accounts[3]})
    with reverts("NodeRegistryNotActive", node):
        net.registry.update(node, "A100", 40, 1, "", {"from": accounts[3]})


# ------------------------------------------------------------------ token


def test_token_faucet_drips_with_cooldown(net):
    amount = net.token.faucetAmount()
    assert net.token.faucetEnabled() and net.token.faucetCooldown() == 3600
    tx = net.token.drip({"from": accounts[7]})
    ts = chain[tx.block_number].timestamp
    assert event(tx, "FaucetDripped") == {"account": accounts[7], "amount": amount, "nextDripAt": ts + 3600}
    assert net.token.balanceOf(accounts[7]) == amount
    assert net.token.nextDripAt(accounts[7]) == ts + 3600
    with reverts("IntellectTokenFaucetCooldown", accounts[7], ts + 3600):
        net.token.drip({"from": accounts[7]})
    chain.sleep(3601)
    net.token.drip({"from": accounts[7]})
    assert net.token.balanceOf(accounts[7]) == 2 * amount


def test_token_without_faucet(net):
    token = IntellectToken.deploy(accounts[0], False, 5, 5, {"from": accounts[0]})
    assert not token.faucetEnabled() and token.faucetAmount() == 0
    with reverts("IntellectTokenFaucetDisabled"):
        token.drip({"from": accounts[1]})
    with reverts("IntellectTokenInvalidFaucet", 0, 10):
        IntellectToken.deploy(accounts[0], True, 0, 10, {"from": accounts[0]})


def test_token_mint_by_role_only(net):
    tx = net.token.mint(accounts[2], 5 * TOKEN, {"from": accounts[0]})
    assert event(tx, "Transfer")["value"] == 5 * TOKEN
    with reverts("AccessControlUnauthorizedAccount"):
        net.token.mint(accounts[2], 1, {"from": accounts[2]})
    net.token.grantRole(net.token.MINTER_ROLE(), accounts[2], {"from": accounts[0]})
    net.token.mint(accounts[3], 1, {"from": accounts[2]})


def test_token_permit(net):
    holder = new_key_account("permit")
    deadline = chain.time() + 600
    sig = permit_signature(net.token, holder, accounts[4], 7, deadline, nonce=0)
    net.token.permit(holder, accounts[4], 7, deadline, sig.v, f"0x{sig.r:064x}", f"0x{sig.s:064x}", {"from": accounts[4]})
    assert net.token.allowance(holder, accounts[4]) == 7
