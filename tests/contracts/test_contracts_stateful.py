"""Stateful property test of the whole protocol (brownie's hypothesis state machine).

Random sequences of register / stake / claim / submit / challenge / vote / resolve / claimRewards /
voidSubmissions / requestUnstake / withdraw / publishCheckpoint with time moves across lease, window and
vote-period edges. A Python model predicts every outcome from the transaction's own block timestamp; after
each step the invariants are checked:

- token conservation: sum of all balances (+ the stake manager's and the ledger's) = total supply;
  the stake manager holds exactly the nodes' stakes; the ledger exactly pool budgets + reservations + bonds
- no reward is paid for an upheld, voided, challenged-pending or unfinalised (window open) submission,
  and none twice
- no withdrawal succeeds while a challenge against the node is open, nor pays out stake that was active
  when one of its still-challengeable submissions was claimed
- stale and future policy steps are refused
- challenges weigh votes by validator stake at the block before they opened; a rejected submission can be
  challenged again inside its window
- a node holds at most maxOpenLeases unsubmitted leases and maxReservationBps of the escrow in reservations
  (its book matches the model after every step); an upheld challenge voids only the worker's submissions
  whose window was still open
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

import pytest
from brownie import accounts, chain, web3
from brownie.exceptions import VirtualMachineError
from contracts_helpers import (
    MIN_STAKE,
    PROOFS_HASH,
    ROLLOUTS_CID,
    TOKEN,
    VALIDATOR,
    WORKER,
    brownie_state_machine,
)
from hypothesis import strategies as st

WINDOW, VOTE, LEASE, UNBOND = 300, 120, 600, 3600
REWARD, BOND, SLASH, ASYNC = TOKEN, 10 * TOKEN, 50 * TOKEN, 2
SHARE_BPS = 5_000
MAX_LEASES, MAX_RESERVATION_BPS = 2, 2_500  # the dev pool's
SLEEPS = [1, 2, 59, 118, 121, 298, 302, 599, 602, 3601]


@dataclass
class NodeM:
    addr: str
    owner: str
    role: int
    active: int = 0
    unbonding: int = 0
    release_at: int = 0
    last_request: int = -1
    open_challenges: int = 0
    epoch: int = 0
    open_leases: int = 0
    reserved: int = 0
    wiped_at: dict = field(default_factory=dict)  # ended epoch -> when it ended


@dataclass
class TaskM:
    node: str
    lease: int
    claimed_at: int
    status: str = "claimed"  # claimed, submitted, challenged, upheld, paid, voided, expired
    reward: int = 0
    window_end: int = 0
    epoch: int = 0
    challenged: bool = False


@dataclass
class ChallengeM:
    """One round of a challenge: the electorate and weights are the validators' stakes when it opened."""

    challenger: str
    vote_end: int
    weights: dict  # validator -> weight at the snapshot (the block before the challenge)
    voters: set = field(default_factory=set)
    votes_for: int = 1
    votes_against: int = 0
    weight_for: int = 0
    weight_against: int = 0
    open: bool = True

    @property
    def electorate(self) -> int:
        return sum(self.weights.values())


OUTCOMES: Counter = Counter()
STEPS: list[int] = []


def _send(fn, *args, sender):
    """Sends a transaction; returns (ok, tx or exception, block timestamp of the mined transaction)."""
    try:
        tx = fn(*args, {"from": sender})
        OUTCOMES[f"{fn._name} ok"] += 1
        return True, tx, chain[tx.block_number].timestamp
    except VirtualMachineError as exc:
        OUTCOMES[f"{fn._name} {(exc.revert_msg or '').split(':')[0]}"] += 1
        ts = chain.time()
        if exc.txid:
            receipt = web3.eth.get_transaction_receipt(exc.txid)
            ts = web3.eth.get_block(receipt["blockNumber"])["timestamp"]
        return False, exc, ts


class ProtocolMachine:
    st_idx = st.integers(min_value=0, max_value=63)
    st_units = st.sampled_from([1, 7, 1024, -1, 0])  # -1: one above the pool's maxUnitsPerSubmission
    st_step_back = st.integers(min_value=-1, max_value=ASYNC + 1)
    st_sleep = st.sampled_from(SLEEPS)
    st_bool = st.booleans()
    st_amount = st.sampled_from([1 * TOKEN, 30 * TOKEN, 100 * TOKEN])

    def __init__(cls, net) -> None:
        cls.net = net
        cls.max_units = int(net.pool()["params"]["maxUnitsPerSubmission"])
        cls.operator = accounts[5]
        # workers: one self-owned, two owned by the operator; validators: two self-owned, one of the operator
        cls.initial = [
            (net.register(WORKER, seed="sm-w0"), None, WORKER),
            (net.register(WORKER, owner=cls.operator, seed="sm-w1"), cls.operator, WORKER),
            (net.register(WORKER, owner=cls.operator, seed="sm-w2"), cls.operator, WORKER),
            (net.register(VALIDATOR, seed="sm-v0"), None, VALIDATOR),
            (net.register(VALIDATOR, seed="sm-v1"), None, VALIDATOR),
            (net.register(VALIDATOR, owner=cls.operator, seed="sm-v2"), cls.operator, VALIDATOR),
        ]
        for node, _, role in cls.initial:
            if role == VALIDATOR:
                net.fund(node, 1000 * BOND)
                net.token.approve(net.ledger, 2**255, {"from": node})
        net.fund(cls.operator, 10_000 * TOKEN)
        net.token.approve(net.stake, 2**255, {"from": cls.operator})
        net.publish(0)

    def setup(self) -> None:
        OUTCOMES["examples"] += 1
        STEPS.append(0)
        net = self.net
        self.accts = {}
        self.nodes: dict[str, NodeM] = {}
        for node, owner, role in self.initial:
            self.accts[node.address] = node
            self.nodes[node.address] = NodeM(node.address, (owner or node).address, role, active=MIN_STAKE)
        self.tasks: dict[int, TaskM] = {}
        self.challenges: dict[int, ChallengeM] = {}
        self.latest = 0
        p = net.pool()
        self.budget, self.reserved = p["budget"], p["reserved"]
        self.bonds = 0
        self.paid: set[int] = set()
        self._others_balance = None
        # every address tokens can reach in this machine: nodes, their owners, the treasury (the deployer)
        self.holders = self.holders_init()

    # ------------------------------------------------------------------ helpers

    def holders_init(self) -> set[str]:
        return set(self.nodes) | {self.operator.address, self.net.admin.address, self.net.stake.treasury()}

    def _workers(self) -> list[NodeM]:
        return [n for n in self.nodes.values() if n.role == WORKER]

    def _validators(self) -> list[NodeM]:
        return [n for n in self.nodes.values() if n.role == VALIDATOR]

    def _pick(self, items, idx):
        return items[idx % len(items)] if items else None

    def _eligible(self, n: NodeM, role: int) -> bool:
        return n.role == role and n.active >= MIN_STAKE

    def _void(self, t: TaskM) -> bool:
        """A wipe after the submission ended its epoch while its window was still open."""
        n = self.nodes[t.node]
        return t.epoch != n.epoch and t.window_end > n.wiped_at[t.epoch]

    def _slash(self, n: NodeM) -> int:
        amount = min(SLASH, n.active + n.unbonding)
        from_active = min(amount, n.active)
        n.active -= from_active
        n.unbonding -= amount - from_active
        if n.unbonding == 0:
            n.release_at = 0
        return amount

    # ------------------------------------------------------------------ rules

    def rule_sleep(self, st_sleep):
        chain.sleep(st_sleep)

    def rule_register_worker(self, st_bool):
        if len(self.nodes) >= 9:
            return
        owner = self.operator if st_bool else None
        # deterministic per example (hypothesis replays examples on a reverted chain)
        node = self.net.register(WORKER, owner=owner, seed=f"sm-extra-{len(self.nodes)}")
        # register() approves exactly the stake it pulls; restore the operator's standing allowance
        self.net.token.approve(self.net.stake, 2**255, {"from": self.operator})
        self.accts[node.address] = node
        self.nodes[node.address] = NodeM(node.address, (owner or node).address, WORKER, active=MIN_STAKE)
        self.holders.add(node.address)

    def rule_stake(self, st_idx, st_amount):
        n = self._pick(self._workers(), st_idx)
        ok, res, _ = _send(self.net.stake.stake, n.addr, st_amount, sender=self.operator)
        assert ok, res
        n.active += st_amount

    def rule_publish(self, st_bool):
        step = self.latest + (2 if st_bool else 1)
        ok, res, _ = _send(self.net.ledger.publishCheckpoint, self.net.pool_id, step, "m", sender=self.net.admin)
        assert ok, res
        self.latest = step

    def rule_work(self, st_idx, st_units, st_step_back, st_bool):
        """claimTask, and (unless st_bool) submitWork right away, as a worker does."""
        n = self._pick(self._workers(), st_idx)
        ok, tx, ts = _send(self.net.ledger.claimTask, self.net.pool_id, sender=self.accts[n.addr])
        assert ok == (self._eligible(n, WORKER) and n.open_leases < MAX_LEASES), (ok, n)
        if ok:
            tid = int(tx.return_value)
            n.open_leases += 1
            self.tasks[tid] = TaskM(n.addr, ts + LEASE, ts)
            if not st_bool:
                self._submit(tid, st_units, st_step_back)

    def rule_submit(self, st_idx, st_units, st_step_back):
        claimed = [i for i, t in self.tasks.items() if t.status == "claimed"]
        tid = self._pick(claimed, st_idx)
        if tid is not None:
            self._submit(tid, st_units, st_step_back)

    def _submit(self, tid, st_units, st_step_back):
        t = self.tasks[tid]
        st_units = self.max_units + 1 if st_units < 0 else st_units
        step = self.latest - st_step_back
        if step < 0:
            return
        ok, tx, ts = _send(
            self.net.ledger.submitWork, tid, ROLLOUTS_CID, PROOFS_HASH, st_units, step, sender=self.accts[t.node]
        )
        reward = st_units * REWARD
        node = self.nodes[t.node]
        cap = (self.budget + self.reserved) * MAX_RESERVATION_BPS // 10_000
        expect = (
            ts <= t.lease
            and 1 <= st_units <= self.max_units
            and self.latest - ASYNC <= step <= self.latest
            and self.budget >= reward
            and node.reserved + reward <= cap
        )
        assert ok == expect, (ok, expect, ts, t, st_units, step, self.latest)
        if not ok:
            msg = tx.revert_msg
            if not (self.latest - ASYNC <= step <= self.latest) and ts <= t.lease and 1 <= st_units <= self.max_units:
                assert msg.startswith(("TaskLedgerStalePolicyStep", "TaskLedgerFuturePolicyStep")), msg
            return
        t.status, t.reward, t.window_end = "submitted", reward, ts + WINDOW
        t.epoch = node.epoch
        node.open_leases -= 1
        node.reserved += reward
        self.budget -= reward
        self.reserved += reward

    def rule_expire(self, st_idx):
        claimed = [i for i, t in self.tasks.items() if t.status == "claimed"]
        tid = self._pick(claimed, st_idx)
        if tid is None:
            return
        t = self.tasks[tid]
        ok, _, ts = _send(self.net.ledger.expireLease, tid, sender=accounts[9])
        assert ok == (ts > t.lease), (ok, ts, t)
        if ok:
            t.status = "expired"
            self.nodes[t.node].open_leases -= 1

    def rule_challenge(self, st_idx, st_bool):
        subs = [i for i, t in self.tasks.items() if t.status == "submitted"]
        tid = self._pick(subs, st_idx)
        if tid is None:
            return
        t = self.tasks[tid]
        v = self._pick(self._validators(), st_idx + int(st_bool))
        ok, _, ts = _send(self.net.ledger.challenge, tid, "evidence", sender=self.accts[v.addr])
        worker = self.nodes[t.node]
        expect = ts < t.window_end and self._eligible(v, VALIDATOR) and v.owner != worker.owner
        assert ok == expect, (ok, expect, ts, t, v)
        if ok:
            t.status, t.challenged = "challenged", True
            weights = {n.addr: n.active for n in self._validators()}
            self.challenges[tid] = ChallengeM(v.addr, ts + VOTE, weights, {v.addr}, weight_for=weights[v.addr])
            worker.open_challenges += 1
            self.bonds += BOND

    def rule_vote(self, st_idx, st_bool):
        open_ids = [i for i, c in self.challenges.items() if c.open]
        cid = self._pick(open_ids, st_idx)
        if cid is None:
            return
        c = self.challenges[cid]
        v = self._pick(self._validators(), st_idx // 3)
        worker = self.nodes[self.tasks[cid].node]
        ok, _, ts = _send(self.net.ledger.vote, cid, st_bool, sender=self.accts[v.addr])
        expect = (ts < c.vote_end and self._eligible(v, VALIDATOR) and v.addr not in c.voters
                  and v.owner != worker.owner and c.weights.get(v.addr, 0) > 0)
        assert ok == expect, (ok, expect, ts, c, v)
        if ok:
            c.voters.add(v.addr)
            if st_bool:
                c.votes_for += 1
                c.weight_for += c.weights[v.addr]
            else:
                c.votes_against += 1
                c.weight_against += c.weights[v.addr]

    def rule_resolve(self, st_idx):
        open_ids = [i for i, c in self.challenges.items() if c.open]
        cid = self._pick(open_ids, st_idx)
        if cid is None:
            return
        c = self.challenges[cid]
        t = self.tasks[cid]
        ok, tx, ts = _send(self.net.ledger.resolve, cid, sender=accounts[9])
        quorate = c.votes_for + c.votes_against >= 1
        if ts < c.vote_end:
            if 2 * c.weight_for > c.electorate and quorate:
                expect_ok, upheld = True, True
            elif 2 * c.weight_against >= c.electorate:
                expect_ok, upheld = True, False
            else:
                expect_ok, upheld = False, None
        else:
            expect_ok, upheld = True, c.weight_for > c.weight_against and quorate
        assert ok == expect_ok, (ok, expect_ok, ts, c)
        if not ok:
            return
        assert tx.return_value == upheld
        c.open = False
        worker = self.nodes[t.node]
        worker.open_challenges -= 1
        self.bonds -= BOND
        if upheld:
            t.status = "upheld"
            self.reserved -= t.reward
            self.budget += t.reward
            worker.reserved -= t.reward
            worker.wiped_at[worker.epoch] = ts
            worker.epoch += 1
            slashed = self._slash(worker)
            assert tx.events["ChallengeResolved"][0]["slashed"] == slashed
        else:
            t.status = "submitted"

    def rule_claim_rewards(self, st_idx, st_bool):
        mine = [i for i, t in self.tasks.items() if t.status in ("submitted", "challenged", "upheld", "paid", "voided")]
        if not mine:
            return
        tid = self._pick(mine, st_idx)
        t = self.tasks[tid]
        ids = [tid]
        if st_bool:
            same = [i for i, u in self.tasks.items() if u.node == t.node and i != tid and u.status == "submitted"]
            ids += same[:1]
        node = self.nodes[t.node]
        before = self.net.token.balanceOf(node.owner)
        ok, _, ts = _send(self.net.ledger.claimRewards, ids, sender=self.accts[t.node])
        expect = all(
            self.tasks[i].status == "submitted" and ts >= self.tasks[i].window_end and not self._void(self.tasks[i])
            for i in ids
        )
        assert ok == expect, (ok, expect, ts, [self.tasks[i] for i in ids])
        if ok:
            total = sum(self.tasks[i].reward for i in ids)
            assert self.net.token.balanceOf(node.owner) == before + total
            for i in ids:
                assert i not in self.paid, f"double payment of {i}"
                self.paid.add(i)
                self.tasks[i].status = "paid"
                self.nodes[self.tasks[i].node].reserved -= self.tasks[i].reward
            self.reserved -= total

    def rule_void(self, st_idx):
        subs = [i for i, t in self.tasks.items() if t.status == "submitted"]
        tid = self._pick(subs, st_idx)
        if tid is None:
            return
        t = self.tasks[tid]
        ok, _, _ = _send(self.net.ledger.voidSubmissions, [tid], sender=accounts[9])
        assert ok == self._void(t), (ok, t)
        if ok:
            t.status = "voided"
            self.nodes[t.node].reserved -= t.reward
            self.reserved -= t.reward
            self.budget += t.reward

    def rule_request_unstake(self, st_idx, st_amount):
        n = self._pick(list(self.nodes.values()), st_idx)
        ok, _, ts = _send(self.net.stake.requestUnstake, n.addr, st_amount, sender=self.accts.get(n.owner) or accounts.at(n.owner))
        assert ok == (st_amount <= n.active), (ok, n, st_amount)
        if ok:
            n.active -= st_amount
            n.unbonding += st_amount
            n.release_at = ts + UNBOND
            n.last_request = ts

    def rule_withdraw(self, st_idx):
        n = self._pick(list(self.nodes.values()), st_idx)
        sender = self.accts.get(n.owner) or accounts.at(n.owner)
        ok, _, ts = _send(self.net.stake.withdraw, n.addr, sender=sender)
        expect = n.unbonding > 0 and ts >= n.release_at and n.open_challenges == 0
        assert ok == expect, (ok, expect, ts, n)
        if ok:
            # nothing withdrawn may have been active stake when a still-challengeable submission was claimed
            for t in self.tasks.values():
                if t.node == n.addr and (t.status == "challenged" or (t.status == "submitted" and ts < t.window_end)):
                    assert n.last_request < t.claimed_at, ("withdrawal escapes a pending slash", t, n)
            n.unbonding, n.release_at = 0, 0

    # ------------------------------------------------------------------ invariants

    def _snapshot(self) -> dict:
        """Every value the invariants need, read in ONE JSON-RPC batch (the machine checks after each step)."""
        net = self.net
        tok = web3.eth.contract(address=net.token.address, abi=net.token.abi)
        sm = web3.eth.contract(address=net.stake.address, abi=net.stake.abi)
        led = web3.eth.contract(address=net.ledger.address, abi=net.ledger.abi)
        everyone = sorted({a.address for a in accounts} | self.holders)
        nodes = list(self.nodes)
        with web3.batch_requests() as batch:
            batch.add(tok.functions.totalSupply())
            batch.add(tok.functions.balanceOf(net.stake.address))
            batch.add(tok.functions.balanceOf(net.ledger.address))
            batch.add(sm.functions.totalStaked())
            batch.add(led.functions.pool(net.pool_id))
            for a in everyone:
                batch.add(tok.functions.balanceOf(a))
            for n in nodes:
                batch.add(sm.functions.stakeOf(n))
            for n in nodes:
                batch.add(led.functions.nodeBook(n, net.pool_id))
            out = batch.execute()
        supply, in_stake, in_ledger, total_staked, pool = out[:5]
        balances = dict(zip(everyone, out[5 : 5 + len(everyone)], strict=True))
        k = 5 + len(everyone)
        stakes = dict(zip(nodes, out[k : k + len(nodes)], strict=True))
        books = dict(zip(nodes, out[k + len(nodes) :], strict=True))
        return {
            "supply": supply, "in_stake": in_stake, "in_ledger": in_ledger, "total_staked": total_staked,
            "budget": pool[2], "reserved": pool[3], "balances": balances, "stakes": stakes, "books": books,
        }

    def invariant_protocol(self):
        STEPS[-1] += 1
        snap = self._snapshot()
        # token conservation: balances + stakes + escrow (+ treasury, one of the balances) = supply
        held = sum(snap["balances"].values())
        assert held + snap["in_stake"] + snap["in_ledger"] == snap["supply"]
        others = sum(v for a, v in snap["balances"].items() if a not in self.holders)
        if self._others_balance is None:
            self._others_balance = others
        assert others == self._others_balance, "tokens reached an address outside the protocol's flows"
        staked = sum(n.active + n.unbonding for n in self.nodes.values())
        assert snap["in_stake"] == snap["total_staked"] == staked
        assert (snap["budget"], snap["reserved"]) == (self.budget, self.reserved)
        assert snap["in_ledger"] == self.budget + self.reserved + self.bonds
        for addr, n in self.nodes.items():
            active, unbonding, _, open_challenges = snap["stakes"][addr][:4]
            assert (active, unbonding, open_challenges) == (n.active, n.unbonding, n.open_challenges), n
            reserved, open_leases = snap["books"][addr][:2]
            assert (reserved, open_leases) == (n.reserved, n.open_leases), n
        # no reward for upheld/voided work, none twice
        for i in self.paid:
            assert self.tasks[i].status == "paid"
        for i, t in self.tasks.items():
            if t.status in ("upheld", "voided"):
                assert i not in self.paid


def _run(net, max_examples: int, steps: int) -> None:
    brownie_state_machine(
        ProtocolMachine,
        net,
        settings={"max_examples": max_examples, "stateful_step_count": steps, "deadline": None},
    )
    print("state machine outcomes:", dict(sorted(OUTCOMES.items())), "steps per example:", STEPS)


def test_state_machine_protocol_invariants(net):
    # hypothesis keeps its first ~10 examples short (a small-example phase), so fewer examples than ~20 would
    # never reach long sequences
    _run(net, max_examples=12, steps=25)


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_state_machine_protocol_invariants_long(net):
    examples = int(os.environ.get("INTELLECT_SM_EXAMPLES", "100"))
    _run(net, max_examples=examples, steps=50)
