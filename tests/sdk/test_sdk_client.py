"""intellect.sdk.Protocol against a real anvil with the contracts deployed by scripts/deploy.py."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import requests

from intellect.sdk import (
    ChallengeStatus,
    ConfigError,
    ContractRevert,
    NodeStatus,
    Protocol,
    RetryPolicy,
    Role,
    RpcError,
    TaskStatus,
    TransactionTimeout,
    TransientRpcError,
    dev_account,
    parse_tokens,
)
from intellect.sdk.devnet import Devnet
from intellect.sdk.http import HttpServer, JsonHandler

TOKEN = 10**18
FAST = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.05)


def _worker(net: Devnet, index: int = 1, stake: int = 100 * TOKEN) -> Protocol:
    """Dev account `index` as a registered, staked worker (tokens from the faucet)."""
    p = net.protocol(index)
    p.drip()
    p.register_node("worker", gpu_model="cpu", endpoint=f"http://worker{index}")
    p.stake(p.address, stake)
    return p


def _validator(net: Devnet, index: int = 2) -> Protocol:
    p = net.protocol(index)
    p.drip()
    p.register_node(Role.VALIDATOR, gpu_model="cpu")
    p.stake(p.address, 100 * TOKEN)
    return p


def test_connect_reads_deployment_and_default_pool(net: Devnet) -> None:
    p = net.protocol(None)
    assert p.account is None
    pool = p.pool(net.deployment.default_pool_id or 1)
    assert pool.params.quorum == 1 and pool.budget > 0
    assert pool.latest_step is None and p.latest_checkpoint(pool.pool_id) is None
    assert p.pool_count() >= 1
    with pytest.raises(ConfigError, match="needs an account"):
        p.drip()


def test_register_node_and_stake_roundtrip(net: Devnet) -> None:
    p = net.protocol(1)
    assert p.drip() == p.faucet_info().amount
    node = p.register_node("worker", gpu_model="H100-80GB", vram_gib=80, gpu_count=8, endpoint="http://w1")
    assert node.status == NodeStatus.ACTIVE and node.role == Role.WORKER and node.owner == p.address
    assert p.is_active(p.address, "worker") and p.active_count(Role.WORKER) == 1
    s = p.stake(p.address, 150 * TOKEN)
    assert s.active == 150 * TOKEN and s.meets_minimum
    s = p.request_unstake(p.address, 50 * TOKEN)
    assert s.active == 100 * TOKEN and s.unbonding == 50 * TOKEN and s.release_at > p.chain_time()
    with pytest.raises(ContractRevert) as err:
        p.withdraw(p.address)
    assert err.value.name == "StakeManagerStillUnbonding"
    net.increase_time(p.unbonding_period() + 1)
    before = p.balance_of()
    assert p.withdraw(p.address) == 50 * TOKEN
    assert p.balance_of() == before + 50 * TOKEN
    p.exit_node()
    assert p.node().status == NodeStatus.EXITED


def test_register_node_for_separate_node_key(net: Devnet) -> None:
    owner = net.protocol(3)
    node_key = dev_account(7)
    node = owner.register_node("relay", node_account=node_key, endpoint="http://relay")
    assert node.address == node_key.address and node.owner == owner.address
    assert owner.owner_of(node_key.address) == owner.address


def test_worker_flow_claim_submit_reward(net: Devnet) -> None:
    trainer = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 1, "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am")
    assert trainer.latest_checkpoint(pool_id).step == 1  # type: ignore[union-attr]
    w = _worker(net)
    claim = w.claim_task(pool_id)
    assert len(claim.seed) == 32 and claim.node == w.address
    assert w.task(claim.task_id).status == TaskStatus.CLAIMED
    sub = w.submit_work(claim.task_id, "bafkreirollouts", b"\x11" * 32, 3, 1)
    assert sub.reward == 3 * TOKEN and sub.status == TaskStatus.SUBMITTED
    [listed] = w.submissions(pool_id=pool_id, node=w.address)
    assert listed.rollouts_cid == "bafkreirollouts" and listed.proofs_hash == b"\x11" * 32
    r = w.rewards()
    assert r.claimable == 0 and r.pending == 3 * TOKEN and r.pending_ids == [claim.task_id]
    net.increase_time(w.pool(pool_id).params.window_length + 1)
    r = w.rewards()
    assert r.claimable == 3 * TOKEN and r.claimable_ids == [claim.task_id]
    before = w.balance_of()
    assert w.claim_all_rewards() == 3 * TOKEN
    assert w.balance_of() == before + 3 * TOKEN
    assert w.rewards().paid == 3 * TOKEN
    assert [c.step for c in w.checkpoints(pool_id)] == [1]


def test_challenge_upheld_slashes_worker(net: Devnet) -> None:
    trainer = net.protocol(0)
    pool_id = net.deployment.default_pool_id or 1
    trainer.publish_checkpoint(pool_id, 5, "bafkreimanifest")
    w = _worker(net)
    v = _validator(net)
    claim = w.claim_task(pool_id)
    w.submit_work(claim.task_id, "bafkreibad", b"\x22" * 32, 1, 5)
    ch = v.challenge(claim.task_id, "bafkreievidence")
    assert ch.status == ChallengeStatus.OPEN and ch.votes_for == 1 and v.has_voted(claim.task_id, v.address)
    net.increase_time(w.pool(pool_id).params.vote_period + 1)
    assert v.resolve(claim.task_id) is True
    assert v.challenge_info(claim.task_id).status == ChallengeStatus.UPHELD
    assert w.stake_of().active < 100 * TOKEN
    assert w.task(claim.task_id).status == TaskStatus.UPHELD


def test_revert_decoded_with_name_and_args(net: Devnet) -> None:
    p = net.protocol(4)
    with pytest.raises(ContractRevert) as err:
        p.claim_task(net.deployment.default_pool_id or 1)
    # the pool has no checkpoint yet, or the node is not eligible: either way a named custom error
    assert err.value.name in {"TaskLedgerNoCheckpoint", "TaskLedgerNotEligible"}
    p.drip()
    p.register_node("worker")
    p.stake(p.address, 100 * TOKEN)
    with pytest.raises(ContractRevert) as err:
        p.request_unstake(p.address, 101 * TOKEN)
    assert err.value.name == "StakeManagerInsufficientStake"
    assert err.value.error_args == {"node": p.address, "active": 100 * TOKEN, "requested": 101 * TOKEN}
    assert "StakeManager.requestUnstake reverted" in str(err.value)
    with pytest.raises(ContractRevert) as err:
        p.drip()  # cooldown
    assert err.value.name == "IntellectTokenFaucetCooldown" and err.value.error_args["account"] == p.address


def test_revert_is_not_retried(net: Devnet) -> None:
    p = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=5,
                         retry=RetryPolicy(attempts=5, base_delay=5.0, max_delay=5.0))
    t0 = time.monotonic()
    with pytest.raises(ContractRevert):
        p.withdraw(p.address)
    assert time.monotonic() - t0 < 4.0  # one retry would have slept >= 2.5 s


class _FlakyProxy:
    """A real HTTP proxy in front of anvil answering 503 to the first `failures` requests."""

    def __init__(self, upstream: str, failures: int) -> None:
        self.failures = failures
        self.seen = 0
        outer = self

        class H(JsonHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.seen += 1
                if outer.seen <= outer.failures:
                    self.reply(503, b"")
                    return
                r = requests.post(upstream, data=body, headers={"Content-Type": "application/json"}, timeout=10)
                self.reply(r.status_code, r.content, "application/json")

        self.server = HttpServer(H, name="flaky-proxy").start()
        self.url = self.server.url

    def close(self) -> None:
        self.server.stop()


@pytest.fixture
def flaky(net: Devnet) -> Iterator[_FlakyProxy]:
    proxy = _FlakyProxy(net.url, failures=2)
    yield proxy
    proxy.close()


def test_transient_errors_retried_with_backoff(net: Devnet, flaky: _FlakyProxy) -> None:
    p = Protocol.connect(flaky.url, deployment=net.deployment, dev_account_index=1, retry=FAST)
    assert flaky.seen >= 3  # two 503s, then the answer
    direct = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=1)
    assert p.address == direct.address and p.balance_of() == direct.balance_of()  # the chain's answer, retried


def test_transient_errors_give_up_with_clear_error(net: Devnet) -> None:
    with pytest.raises(TransientRpcError, match="after 3 attempts"):
        Protocol.connect("http://127.0.0.1:9", deployment=net.deployment, retry=FAST)


def test_nonce_manager_many_threads(net: Devnet) -> None:
    p = net.protocol(0)
    to = dev_account(9).address
    before = p.balance_of(to)
    errors: list[BaseException] = []

    def send(n: int) -> None:
        try:
            for _ in range(n):
                p.transfer(to, 1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(5,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert p.balance_of(to) == before + 20


def test_fee_cap_below_base_fee_refused(net: Devnet) -> None:
    p = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=1, max_fee_gwei=1e-9)
    with pytest.raises(RpcError, match="above the cap"):
        p.drip()


def test_receipt_timeout(net: Devnet) -> None:
    p = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=6, receipt_timeout=1.0)
    net.anvil.rpc("evm_setAutomine", [False])
    try:
        with pytest.raises(TransactionTimeout):
            p.drip()
    finally:
        net.anvil.rpc("evm_setAutomine", [True])
        net.anvil.mine(1)


def test_dropped_transaction_sent_again(net: Devnet, caplog: pytest.LogCaptureFixture) -> None:
    """The RPC node forgets a pending transaction (a restart without its mempool, an eviction): the sender sends
    the same signed bytes again instead of waiting out its receipt timeout, and its later transactions are not held
    behind a nonce gap (the faults soak saw a worker stall on one)."""
    caplog.set_level("WARNING", logger="intellect.sdk._tx")
    p = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=0, receipt_timeout=60.0)
    to = dev_account(9).address
    before = p.balance_of(to)
    net.anvil.rpc("evm_setAutomine", [False])
    done: list[BaseException | None] = []

    def send() -> None:
        try:
            p.transfer(to, 1)
            done.append(None)
        except BaseException as exc:
            done.append(exc)

    t = threading.Thread(target=send)
    try:
        t.start()
        deadline = time.monotonic() + 10
        pending: list[str] = []
        while not pending and time.monotonic() < deadline:
            pool = net.anvil.rpc("txpool_content").get("pending") or {}
            pending = [tx["hash"] for by_nonce in pool.values() for tx in by_nonce.values()]
            time.sleep(0.05)
        assert pending, "the transfer never reached the mempool"
        net.anvil.rpc("anvil_dropTransaction", [pending[0]])
        assert net.anvil.rpc("eth_getTransactionByHash", [pending[0]]) is None
    finally:
        net.anvil.rpc("evm_setAutomine", [True])
    t.join(timeout=60)
    assert done == [None], done
    assert "no longer knew it" in caplog.text
    p.transfer(to, 1)  # the next nonce is free: no gap behind the dropped one
    assert p.balance_of(to) == before + 2


def test_a_nonce_gap_left_by_lost_blocks_is_filled_not_waited_out(net: Devnet, caplog: pytest.LogCaptureFixture) -> None:
    """The chain loses blocks that held this account's transactions (the RPC node restarted from an older state
    dump, a reorg: `evm_revert` here) while the process keeps its own nonce count: its next transaction waits in the
    mempool behind a gap. The sender fills the missing nonces with empty transfers to itself, so the transaction is
    mined well inside its receipt timeout, once (the faults soak saw every live agent wait out 120 s instead)."""
    caplog.set_level("WARNING", logger="intellect.sdk._tx")
    p = Protocol.connect(net.url, deployment=net.deployment, dev_account_index=7, receipt_timeout=60.0)
    to = dev_account(9).address
    p.drip()
    snap = net.anvil.snapshot()
    p.transfer(to, 1)
    p.transfer(to, 1)  # mined, then lost
    assert net.anvil.revert(snap)
    nonce = p.w3.eth.get_transaction_count(p.address)
    before = p.balance_of(to)
    t0 = time.monotonic()
    p.transfer(to, 5)
    assert time.monotonic() - t0 < 30  # a fill after the 5-second check, not the 60-second timeout
    assert p.balance_of(to) == before + 5  # the transfer ran once
    assert p.w3.eth.get_transaction_count(p.address) == nonce + 3  # two fillers and the transfer
    assert "filling 2 nonce(s) with empty transfers" in caplog.text
    p.transfer(to, 1)  # and the count goes on from there
    assert p.balance_of(to) == before + 6


def test_dev_account_refused_on_unknown_network() -> None:
    with pytest.raises(ConfigError, match="unknown network"):
        Protocol.connect("mainnet-of-nowhere")
    assert parse_tokens("1.5") == 1_500_000_000_000_000_000


def test_token_roles_wiring_and_permit(net: Devnet) -> None:
    admin = net.protocol(0)
    meta = admin.token_metadata()
    assert meta["decimals"] == 18 and meta["symbol"]
    assert admin.has_role("IntellectToken", "MINTER_ROLE", admin.address)
    assert admin.has_role("StakeManager", "SLASHER_ROLE", admin.contracts["TaskLedger"].address)
    other = dev_account(5).address
    admin.grant_role("IntellectToken", "MINTER_ROLE", other)
    assert admin.has_role("IntellectToken", "MINTER_ROLE", other)
    admin.revoke_role("IntellectToken", "MINTER_ROLE", other)
    assert not admin.has_role("IntellectToken", "MINTER_ROLE", other)
    assert admin.role_admin("IntellectToken", "MINTER_ROLE") == b"\x00" * 32
    assert admin.supports_interface("TaskLedger", bytes.fromhex("7965db0b"))  # IAccessControl
    w = admin.wiring()
    assert w["TaskLedger.token"] == w["StakeManager.stakeToken"] == admin.contracts["IntellectToken"].address
    assert admin.registry_limits()["max_gpu_model_length"] > 0

    spender = net.protocol(5)
    admin.permit(spender.address, 7 * TOKEN)
    assert admin.allowance(admin.address, spender.address) == 7 * TOKEN
    spender.transfer_from(admin.address, spender.address, 7 * TOKEN)
    assert admin.allowance(admin.address, spender.address) == 0
    with pytest.raises(ContractRevert) as err:
        spender.mint(spender.address, 1)
    assert err.value.name == "AccessControlUnauthorizedAccount"


def test_a_validator_exits_and_unstakes_in_the_block_after_staking(net: Devnet) -> None:
    """The weight checkpoints are keyed by block: estimated against the latest block, where this node's (and the
    total's) checkpoint of that block already exists, an exit or unstake right after a stake costs an overwrite;
    sent, it lands in the next block and pushes two new checkpoints (~40k more gas) and ran out of gas (receipt
    status 0, "unknown" revert). Estimated against the pending block, both go through."""
    for account, act in ((2, "exit"), (3, "unstake")):
        p = net.protocol(account)
        p.drip()
        p.register_node(Role.VALIDATOR, gpu_model="cpu")
        p.stake(p.address, 100 * TOKEN)
        if act == "exit":
            p.exit_node()
            assert p.node().status == NodeStatus.EXITED
        else:
            assert p.request_unstake(p.address, 60 * TOKEN).unbonding == 60 * TOKEN
