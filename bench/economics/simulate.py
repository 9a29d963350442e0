"""Economic simulation of issue 21's incentives, played against the real contracts (deploy_all) on anvil.

Every strategy plays with its own node(s), owner keys and real stake on the dev pool (window 300 s, vote 120 s,
lease 600 s, 1 INTL per unit, challenge bond 10, worker slash 50, attesterSlash 20, voterSlash 10,
maxOpenLeases 2). Whether a submission is bad is a ground-truth flag of the simulation: the contract game is
what is simulated (TOPLOC and the acceptance rule are tested elsewhere). One round:

- workers compute on the chain's clock: each has a throughput (`--small-tps` tokens/s, the gpu-small
  hardware every worker really has) and a work phase per round (`--tasks` gpu-small tasks of compute, each a
  claim, `units / throughput` seconds of generation, a submission the next second: the submission's block is
  stamped claim time + compute time with `evm_setNextBlockTimestamp`, all workers' claims and submissions
  interleaved in order of their planned times). Every claim is judged by the agents' own rule
  (`intellect.agents.roles.budget_class.BudgetClasses`: `intellect.verifier.budget_class` over the node's
  declared hardware and `intellect.sdk.WorkHistory` of the chain as of the block before the claim; `--class-history`
  is the pool rule, 0 believes the declaration): its class fixes the task's units (the longest budget of the
  class x group 4 x 2 problems, full length; the sim's unit is 64 tokens, `BUDGETS`). A new node is judged
  `cpu` until `class_history` leases are decided, then by its verified units per lease-second. Strategies:
  `honest` (declares its gpu-small, writes the class it is judged by); `cheater-10` / `cheater-50` /
  `cheater-100` (each submission bad with that probability, drawn from the cheater's own generator seeded by
  `--seed`; junk costs `--cheat-cost` of honest compute and is submitted when real work would be); `cherry-picker`
  (claims, computes the task's seed from the claim's block, submits only seeds that are cheap for it (its compute
  time x the seed's cost factor), lets the others expire while they hold its lease slots; the claim seeds
  follow block hashes and differ between runs); `overstated` (declares gpu-large, writes the declared class's
  longer budgets and truncates them to what its real speed finishes: judged by a lower class, every file is
  `wrong_problems`, bad); `overstated-patient` (declares gpu-large, writes the class the rule gives it, as the
  worker agent does, at its real speed);
- the trainer (pool owner) submits `--canaries` canaries (known-bad work) from a staked worker node of its own
  in every `--canary-every`-th round (a round is one trainer step: `trainer.canary.every_n_steps`; 0 = none),
  or in a round with probability `--canary-rate` (`trainer.canary.rate`, drawn from a generator seeded by
  `--seed`; overrides `--canary-every` when > 0); records the attestations of each submission's assigned slots
  (AttesterBook, `--attester-reward` per slot: the agents' rule, `intellect.agents.roles.assignment.Assigner`,
  draws k = quorum + 1 slots by stake from the claim's seed, with replacement, leaving out the worker's operator;
  an assigned validator that attested is listed once per slot it holds, as the trainer's
  `record_used_attestations` does; issue 33), slashes every attester of upheld work, assigned or not, with the
  attestation it holds. Who opens
  the canary's challenge: `--canary-challenger validators` (the validators that find it: an honest node holding
  a slot of it, else the volunteer if one plays, else nobody) or `pool` (the pool's own validator key, as
  `trainer.canary.challenger_*` does when nobody else did); either way the challenger collects nothing (since
  issue 33 the worker slash goes wholly to the treasury, the bond comes back when upheld), and the honest
  validators vote with the truth; after the resolution every validator on the winning side (its vote was the
  outcome, or it opened an upheld round) claims its share of the pool's reward per challenge (`--voter-reward`,
  below the bond; `AttesterBook.claimVoterReward`, by stake weight; issue 33; 0: none);
- validators (100 INTL stake each; `--validators` picks them, `honest` required): `honest` (two nodes, playing
  what the validator agent does by default, `validator.check: assigned`: each checks the submissions it holds a
  slot of (k each), attests the good, challenges the bad ones (alternating when both hold a slot), and checks
  (k for each one it holds no slot of) and votes the truth on every challenge opened; the first reports losing
  voters); `volunteer` (one node, `validator.check: all`, the honest play before: checks every submission,
  attests every good one, challenges bad work no honest node holds a slot of, votes the truth on every
  challenge); `lazy` (attests everything, checks nothing); `malicious` (checks, challenges one good submission
  per round, votes against the truth on every challenge); `idle` (nothing); `assigned` (checks only the
  submissions it holds a slot of, attests the good ones, votes the truth on challenges of them, challenges
  nothing: honest minus the votes on challenges of work it holds no slot of); `spot-N` (checks 1 row of N of
  every submission, attests what it did not find bad, votes the truth on every challenge: a challenge names its
  bad row). Bad work no honest node holds a slot of is challenged only by the volunteer (or the pool's key, for
  a canary): without them nobody does;
- the chain moves past the vote period (anyone resolves), past the window (workers and attesters claim, void
  submissions are voided, attester rewards of upheld work released) and past the lease (expired leases freed).
  A node slashed below the minimum stake tops its stake up from its owner's balance (so every strategy keeps
  playing; the top-up is a transfer inside its own wealth).

After every round the token books must balance to the wei: total supply = minted supply = every holder's
balance + the StakeManager's + the TaskLedger's + the AttesterBook's balance; the StakeManager holds exactly
its totalStaked; the ledger exactly the pool's budget + reserved (no challenge is open at a round's end);
the AttesterBook exactly the pool's attester budget + the rewards recorded and not yet claimed or released.

Profit of a strategy = change of (owner balance + node balance + active and unbonding stake) minus its costs:
compute `--unit-cost` INTL per unit generated (honest work; x the seed's cost factor for the cherry-picker,
which conditions on it; everyone else pays the expected factor 1; the truncating overstater pays for what it
generated, not for the units it claims), `--check-cost` INTL per submission a
validator checks. Per day = profit / chain seconds elapsed x 86,400. Gas is not counted (anvil, gas price 0).

Usage:
    .venv/bin/python bench/economics/simulate.py [--rounds 16] [--tasks 2] [--seed 1] [--json out.json]
        [--small-tps 32] [--class-history 4]
        [--unit-cost 0.5] [--check-cost 1.6] [--attester-reward 4] [--canaries 1] [--canary-every 1]
        [--canary-rate 0] [--canary-challenger validators|pool] [--workers honest,cheater-10,...]
        [--validators honest,lazy,malicious,idle,spot-2,spot-4,spot-8,assigned,volunteer]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import io
import json
import logging
import math
import random
import sys
import time
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

log = logging.getLogger("economics")
TOKENS_PER_UNIT = 64  # the sim's work unit; the chain and the rule see units
GROUP, PROBLEMS = 4, 2  # the agents' defaults (worker.group_size, worker.problems_per_task)
# the agents' default budgets' longest lengths (128 / 512 / 2048 tokens) in units: one length per class, full-length
BUDGETS = {"cpu": [2], "gpu-small": [8], "gpu-large": [32]}
TASK_UNITS = {c: max(b) * GROUP * PROBLEMS for c, b in BUDGETS.items()}  # 16 / 64 / 256 units
UNITS = TASK_UNITS["gpu-small"]
CID = "bafkreicysg23kiwv34eg2d7qweipxwosdo2py4ldv42nbauguluen5v6am"
PROOFS = "0x" + "11" * 32
WORKERS = ("honest", "cheater-10", "cheater-50", "cheater-100", "cherry-picker", "overstated", "overstated-patient",
           "sybil")
CHEAT_RATE = {"cheater-10": 0.1, "cheater-50": 0.5, "cheater-100": 1.0}
VALIDATORS = ("honest", "lazy", "malicious", "idle", "spot-2", "spot-4", "spot-8", "assigned", "volunteer")
SYBIL_KEYS = 4  # the sybil worker's keys (one operator, one gpu-small GPU, the minimum stake on each key)
GENESIS_TIME = 1_700_000_000  # anvil --timestamp of the CLI's chain: block hashes (claim seeds) follow from the seed
SMALL = ("RTX4090", 24, 1)  # gpu-small: the hardware every worker really has
LARGE = ("H100", 80, 8)  # gpu-large: what the overstating worker declares


@dataclass
class Params:
    rounds: int = 16
    tasks: int = 2
    seed: int = 1
    unit_cost: float = 0.5
    cheat_cost: float = 0.0
    check_cost: float = 1.6
    attester_reward: float = 4.0  # per slot; > k / ((1 - b)·E[slots | assigned]) ≈ 2.0-2.6 (docs/economics.md)
    voter_reward: float = 9.0  # per resolved challenge, shared by the winning side by stake (< the bond, 10)
    canaries: int = 1  # canaries in a round that has them
    canary_every: int = 1  # a canary round every n rounds (trainer.canary.every_n_steps; 0: no canaries)
    canary_rate: float = 0.0  # > 0: a canary round with this probability instead (trainer.canary.rate)
    canary_challenger: str = "validators"  # who opens the canaries' challenges: "validators" | "pool"
    small_tps: float = 32.0  # generation throughput of the gpu-small hardware every worker has (tokens/s)
    class_history: int = 4  # pool rule tasks.class_history (None in the agents' config = 4; 0: declaration believed)
    front_run: int = 1  # the pool owner tries to defund reserved and in-flight work every round (1) or not (0)
    workers: str = ",".join(WORKERS)  # the worker strategies in play (comma-separated)
    validators: str = ",".join(VALIDATORS)  # the validator strategies in play (comma-separated)


@dataclass
class Player:
    strategy: str
    role: str  # "worker" | "validator"
    node: Any
    owner: Any
    start: int = 0
    cost: float = 0.0  # INTL spent off-chain (compute, checks)
    index: int = 0  # its start offset (s) in each work phase
    rng: random.Random = field(default_factory=random.Random)  # its own draws (cheaters), seeded per strategy
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    keys: list[Any] = field(default_factory=list)  # every node key of the operator (the sybil: several)
    turn: int = 0  # the sybil's next key

    def __post_init__(self) -> None:
        if not self.keys:
            self.keys = [self.node]

    def spot(self) -> int:
        """N of a spot-checking validator `spot-N` (it checks 1 row of every N); 1 for a full checker."""
        return int(self.strategy.split("-")[1]) if self.strategy.startswith("spot-") else 1


@dataclass
class Sub:
    sid: int
    player: Player
    bad: bool
    attesters: list[Player] = field(default_factory=list)
    node: Any = None  # the key that claimed and submitted it
    seen_bad: set[int] = field(default_factory=set)  # ids of the validators that found it bad
    slots: dict[str, int] = field(default_factory=dict)  # validator node address -> slots recorded (paid) for it
    assigned: list[str] = field(default_factory=list)  # its slots (validators, lower case; one may hold several)


class Sim:
    def __init__(self, p: Params) -> None:
        from brownie import accounts, chain, web3
        from eth_utils import keccak

        from scripts._deployment import TOKEN, dev_params
        from scripts._eip712 import registration_signature
        from scripts.deploy import deploy_all

        self.p, self.rng = p, random.Random(p.seed)
        self.accounts, self.chain, self.web3, self.keccak, self.TOKEN = accounts, chain, web3, keccak, TOKEN
        self.sig = registration_signature
        self.admin = accounts[0]  # deployer, pool owner and trainer
        self.treasury = accounts[9]  # slashes' treasury share, kept apart from the trainer's books
        self.stats: dict[str, int] = defaultdict(int)
        self.host: dict[str, int] = defaultdict(int)  # what depends on the host's load, not on the seed
        self.pin_clock()
        params = dev_params().model_copy(update={"treasury": self.treasury.address})
        d = deploy_all(self.admin, params, dev=True)
        self.token, self.reg, self.sm, self.ledger, self.book = (
            d.token, d.registry, d.stake_manager, d.ledger, d.attester_book)
        self.pool = d.default_pool_id
        pp = self.ledger.pool(self.pool)["params"]
        self.window_s, self.vote_s, self.lease_s = int(pp["windowLength"]), int(pp["votePeriod"]), int(
            pp["leaseDuration"])
        self.minted = self.token.totalSupply()
        self.tx(self.book.setAttesterReward, self.pool, int(p.attester_reward * TOKEN), sender=self.admin, must=True)
        if p.voter_reward > 0:
            self.tx(self.book.setVoterReward, self.pool, int(p.voter_reward * TOKEN), sender=self.admin, must=True)
        self.tx(self.token.approve, self.book, 2**255, sender=self.admin, must=True)
        self.tx(self.book.fundAttesterRewards, self.pool, 20_000 * TOKEN, sender=self.admin, must=True)
        self.tx(self.ledger.publishCheckpoint, self.pool, 0, "m0", sender=self.admin, must=True)
        self.tx(self.token.approve, self.ledger, 2**255, sender=self.admin, must=True)  # refunds after a defund
        # the seed into the chain's state: every later block hash, so every claim seed and every validator's
        # assignment draw, follows it (without this, two seeds drew the same slots: the seed reached only the
        # cheaters', the spot checkers' and the canary schedule's generators). An allowance moves no token.
        self.tx(self.token.approve, self.treasury, 1 + p.seed, sender=self.admin, must=True)
        self.n = 0
        chosen = [w.strip() for w in p.workers.split(",") if w.strip()]
        unknown = set(chosen) - set(WORKERS)
        if unknown or "honest" not in chosen:
            raise ValueError(f"--workers {p.workers!r}: needs 'honest', knows {', '.join(WORKERS)}")
        vchosen = [v.strip() for v in p.validators.split(",") if v.strip()]
        unknown = set(vchosen) - set(VALIDATORS)
        if unknown or "honest" not in vchosen:
            raise ValueError(f"--validators {p.validators!r}: needs 'honest', knows {', '.join(VALIDATORS)}")
        if p.canary_challenger not in ("validators", "pool"):
            raise ValueError(f"--canary-challenger {p.canary_challenger!r}: 'validators' or 'pool'")
        self.workers = [self._player(s, "worker", LARGE if s.startswith("overstated") else SMALL,
                                     keys=SYBIL_KEYS if s == "sybil" else 1) for s in chosen]
        for i, pl in enumerate(self.workers):
            pl.index = 2 * i  # start offsets 2 s apart: a claim (a second after a submission) never meets another's
        self.validators = [self._player("honest", "validator"), self._player("honest", "validator")] + [
            self._player(s, "validator") for s in VALIDATORS[1:] if s in vchosen]
        self.canary = self._player("canary", "worker", SMALL, owner=self.admin)
        # the pool's own validator key (its own owner, as the agent's challenger key is its own node): the
        # trainer's, counted in the trainer's books, not a strategy
        self.pool_challenger = (self._player("pool-challenger", "validator") if p.canary_challenger == "pool"
                                else None)
        self.canary_rng = random.Random(f"{p.seed}-canary-schedule")
        self.players = self.workers + self.validators
        for pl in self.players:
            pl.start = self.wealth(pl)
        self.trainer_start = self.trainer_wealth()
        self.t0 = self.now()
        self.classes = self._budget_classes(d)
        self.reserved_attestations = 0  # recorded attester rewards (one per slot) not yet claimed or released
        self.claims: dict[int, tuple[bytes, int, str]] = {}  # task -> (seed, claim block, node): its assignment
        self.book_lines: list[str] = []

    def _budget_classes(self, d: Any) -> Any:
        """The agents' BudgetClasses on this chain (a read-only SDK Protocol over the deployed contracts)."""
        from web3 import Web3

        from intellect.agents.roles.budget_class import BudgetClasses
        from intellect.sdk import Deployment, Protocol

        names = {"IntellectToken": d.token, "NodeRegistry": d.registry, "StakeManager": d.stake_manager,
                 "TaskLedger": d.ledger, "AttesterBook": d.attester_book}
        dep = Deployment.model_validate({"chainId": self.chain.id, "blockNumber": 0, "defaultPoolId": self.pool,
                                         "contracts": {k: {"address": c.address} for k, c in names.items()}})
        proto = Protocol(Web3(Web3.HTTPProvider(self.web3.provider.endpoint_uri)), dep)
        from intellect.agents.roles.assignment import Assigner
        from intellect.verifier.assignment import assignment_size, effective_quorum

        quorum = effective_quorum(None, int(self.ledger.pool(self.pool)["params"]["quorum"]), self.chain.id)
        self.k_slots = assignment_size(quorum)
        self.assigner = Assigner(proto, k=self.k_slots, quorum=quorum)  # the trainer's and validators' rule
        cfg = SimpleNamespace(worker=SimpleNamespace(group_size=GROUP, problems_per_task=PROBLEMS),
                              tasks=SimpleNamespace(budgets=BUDGETS, class_history=self.p.class_history,
                                                    class_lease_share=None))
        params = SimpleNamespace(lease_duration=self.lease_s, window_length=self.window_s)
        return BudgetClasses(proto, self.pool, params, cfg)

    def pin_clock(self) -> None:
        """Make every block's timestamp and base fee a function of the transactions alone, never of the wall
        clock: each block is stamped 1 s after the previous one unless the simulation stamps it
        (`evm_setNextBlockTimestamp`), and the base fee restarts from a fixed value. With the genesis timestamp
        fixed too (`GENESIS_TIME`, the CLI's anvil; a test's snapshot), every block hash, so every claim seed, is
        the same in two runs of one seed."""
        rpc = self.web3.provider.make_request
        rpc("anvil_setBlockTimestampInterval", [1])
        rpc("evm_setNextBlockTimestamp", [self.now() + 1])
        rpc("anvil_setNextBlockBaseFeePerGas", ["0x0"])  # and so every later one: 0

    def advance(self, seconds: int) -> None:
        """Mine a block `seconds` after the latest one (brownie's chain.sleep is evm_increaseTime, which the
        pinned clock ignores)."""
        self.web3.provider.make_request("evm_setNextBlockTimestamp", [self.now() + int(seconds)])
        self.web3.provider.make_request("evm_mine", [])

    def now(self) -> int:
        """The latest block's timestamp (brownie's chain.time() does not follow evm_setNextBlockTimestamp)."""
        return int(self.web3.eth.get_block("latest")["timestamp"])

    # ---------------------------------------------------------------- setup and accounting
    def _mint(self, to: Any, amount: int) -> None:
        self.tx(self.token.mint, to, amount, sender=self.admin, must=True)
        self.minted += amount

    def _player(self, strategy: str, role: str, hw: tuple = SMALL, owner: Any = None, keys: int = 1) -> Player:
        self.n += 1
        if owner is None:
            owner = self.accounts.add("0x" + self.keccak(text=f"economics-owner-{self.n}").hex())
            self.web3.provider.make_request("anvil_setBalance", [owner.address, hex(10**21)])
            self._mint(owner, 10_000 * self.TOKEN)  # top-ups after slashes come from here
        role_id = 1 if role == "worker" else 2
        self.tx(self.token.approve, self.sm, 2**255, sender=owner, must=True)
        nodes = []
        for j in range(keys):  # one operator (owner), `keys` node keys of the minimum stake each
            node = self.accounts.add("0x" + self.keccak(text=f"economics-{self.n}" + (f"-{j}" if j else "")).hex())
            self.web3.provider.make_request("anvil_setBalance", [node.address, hex(10**21)])
            deadline = self.now() + 3600
            self.tx(self.reg.register, node, role_id, *hw, "", deadline,
                    self.sig(self.reg, node, owner.address, role_id, deadline), sender=owner, must=True)
            self._mint(node, 1_000 * self.TOKEN)  # challenge bonds come from the node's own balance
            self.tx(self.token.approve, self.ledger, 2**255, sender=node, must=True)
            self.tx(self.sm.stake, node, 100 * self.TOKEN, sender=owner, must=True)
            nodes.append(node)
        return Player(strategy, role, nodes[0], owner, rng=random.Random(f"{self.p.seed}-{strategy}-{self.n}"),
                      keys=nodes)

    def wealth(self, pl: Player) -> int:
        total = self.token.balanceOf(pl.owner)
        for node in pl.keys:
            s = self.sm.stakeOf(node)
            total += self.token.balanceOf(node) + s["active"] + s["unbonding"]
        return total

    def canaries_now(self, r: int) -> int:
        """How many canaries the trainer injects in round `r` (one trainer step)."""
        p = self.p
        if p.canary_rate > 0:
            return p.canaries if self.canary_rng.random() < p.canary_rate else 0
        return p.canaries if p.canary_every > 0 and (r + 1) % p.canary_every == 0 else 0

    def trainer_wealth(self) -> int:
        """The pool owner's tokens: its balance, its canary node, the pool's escrow in the ledger and in
        the AttesterBook (what the trainer pays out is what leaves this)."""
        pool = self.ledger.pool(self.pool)
        own = self.wealth(self.canary) + (self.wealth(self.pool_challenger) if self.pool_challenger else 0)
        return own + pool["budget"] + pool["reserved"] + self.token.balanceOf(self.book)

    def tx(self, fn: Any, *args: Any, sender: Any, must: bool = False) -> Any:
        """Send `fn(*args)` from `sender`; a revert is counted and returns None (raises with `must`, as the
        set-up's transactions do)."""
        from brownie.exceptions import TransactionError, VirtualMachineError
        from brownie.network.transaction import TransactionReceipt
        from web3.exceptions import TransactionNotFound

        try:
            return fn(*args, {"from": sender})
        except VirtualMachineError as exc:
            if must:
                raise
            self.stats[f"refused {fn._name}: {(exc.revert_msg or '').split(':')[0]}"] += 1
            return None
        except TransactionError as exc:  # brownie's "dropped without known replacement" race on a loaded host
            txid = str(exc).rsplit(" ", 1)[-1]
            for _ in range(20):
                try:
                    receipt = self.web3.eth.get_transaction_receipt(txid)
                    break
                except TransactionNotFound:
                    time.sleep(0.5)
            else:
                raise
            self.host["brownie reported a mined transaction as dropped (receipt read back)"] += 1
            if receipt["status"] != 1:
                if must:
                    raise
                self.stats[f"refused {fn._name}"] += 1
                return None
            return TransactionReceipt(txid)

    def top_up(self, pl: Player) -> None:
        role_id = 1 if pl.role == "worker" else 2
        for node in pl.keys:
            need = self.sm.minStake(role_id) - self.sm.stakeOf(node)["active"]
            if need > 0:
                self.tx(self.sm.stake, node, need, sender=pl.owner)
                pl.counts["top-ups"] += 1

    # ---------------------------------------------------------------- worker moves
    def claim_seed(self, receipt: Any, tid: int, node: Any) -> bytes:
        """The task's seed: keccak(abi.encode(claimBlockHash, node, taskId))."""
        from eth_abi import encode

        bh = self.web3.eth.get_block(receipt.block_number)["hash"]
        return bytes(self.keccak(encode(["bytes32", "address", "uint256"], [bh, node.address, tid])))

    def seed_factor(self, receipt: Any, tid: int, node: Any) -> float:
        """The task's seed mapped to a compute-cost factor in [0.5, 1.5): how expensive its problems are for this
        node (expectation 1)."""
        return 0.5 + (int.from_bytes(self.claim_seed(receipt, tid, node), "big") % 1000) / 1000

    def at(self, t: int) -> int:
        """Stamp the next block at planned time `t` (or one second after the latest block, if that is later:
        counted as a collision); returns the stamp."""
        t = max(int(t), self.now() + 1)
        self.web3.provider.make_request("evm_setNextBlockTimestamp", [t])
        return t

    def claim(self, pl: Player, t: int | None = None) -> tuple[int, Any] | None:
        if t is not None:
            self.at(t)
        rc = self.tx(self.ledger.claimTask, self.pool, sender=pl.node)
        if rc is None:
            return None
        tid = int(rc.return_value)
        self.claims[tid] = (self.claim_seed(rc, tid, pl.node), int(rc.block_number), pl.node.address)
        return tid, rc

    def submit(self, pl: Player, tid: int, units: int, bad: bool, subs: list[Sub], t: int | None = None) -> None:
        if t is not None:
            self.at(t)
        if self.tx(self.ledger.submitWork, tid, CID, PROOFS, units, 0, sender=pl.node):
            subs.append(Sub(tid, pl, bad, node=pl.node))
            pl.counts["bad" if bad else "good"] += 1

    def seconds_for(self, units: float) -> int:
        """Seconds the gpu-small hardware takes to generate `units`."""
        return max(1, math.ceil(units * TOKENS_PER_UNIT / self.p.small_tps))

    def judged(self, pl: Player, block: int) -> str:
        """The class a claim of `pl` in `block` is judged by: the agents' BudgetClasses.class_at."""
        return str(self.classes.class_at(pl.node.address, block))

    def work_phase(self, subs: list[Sub], expiring: list[int]) -> None:
        """Every worker's claims and submissions of one round, on the chain's clock (an event queue ordered by
        planned time): a worker claims, generates for its task's units / its throughput, submits, claims again
        the next second, as long as the task fits in the phase (`--tasks` gpu-small tasks of its time)."""
        p = self.p
        start = self.now() + 2
        length = p.tasks * (self.seconds_for(UNITS) + 1)
        queue: list[tuple[int, int, str, Any]] = [(start + pl.index, i, "claim", None)
                                                  for i, pl in enumerate(self.workers)]
        if p.front_run:  # mid-phase, with leases open and submissions reserved
            queue.append((start + length // 2, -1, "front-run", None))
        heapq.heapify(queue)
        while queue:
            t, i, what, data = heapq.heappop(queue)
            if what == "front-run":
                self.at(t)
                self.front_run()
                continue
            pl = self.workers[i]
            end = start + pl.index + length
            if what == "submit":
                tid, units, bad, node = data
                pl.node = node  # the key that claimed it
                if t != self.at(t):
                    self.stats["worker transactions stamped later than planned (same second)"] += 1
                self.submit(pl, tid, units, bad, subs)
                heapq.heappush(queue, (t + 1, i, "claim", None))
                continue
            pl.node = pl.keys[pl.turn % len(pl.keys)]  # the sybil claims with its keys in turn, on one GPU
            plan = self.plan(pl)
            if plan is None or t + plan[1] > end:
                continue  # the next task does not fit in this round's work phase
            if t != self.at(t):
                self.stats["worker transactions stamped later than planned (same second)"] += 1
            got = self.claim(pl)
            if got is None:  # the lease cap: discarded seeds hold the cherry-picker's slots
                continue
            pl.turn += 1
            tid, rc = got
            cls = self.judged(pl, rc.block_number)
            pl.counts[f"judged {cls}"] += 1
            units, seconds, bad, generated = self.task(pl, cls)
            if pl.strategy == "cherry-picker":
                factor = self.seed_factor(rc, tid, pl.node)
                seconds = self.seconds_for(units * factor)
                if factor >= 1.0 or t + seconds > end:
                    expiring.append(tid)
                    pl.counts["discarded"] += 1
                    heapq.heappush(queue, (t + 1, i, "claim", None))
                    continue
                generated = units * factor
            pl.cost += p.unit_cost * generated
            heapq.heappush(queue, (t + seconds, i, "submit", (tid, units, bad, pl.node)))

    def front_run(self) -> None:
        """The pool owner tries to take the pool's budget back while leases are open and submissions reserved:
        a defund without an announcement, then an announcement and an immediate defund. The ledger refuses both
        (`TaskLedgerDefundNotAnnounced`: a defund waits a lease duration after its announcement, by when every
        lease open at the announcement has been submitted, so reserved, or has expired; reserved work is never
        part of the budget a defund takes). `settle_defund` executes the announced one after the lease."""
        budget = int(self.ledger.pool(self.pool)["budget"])
        for step in ("unannounced", "announced the same second"):
            if step != "unannounced":
                self.tx(self.ledger.announceDefund, self.pool, budget, sender=self.admin, must=True)
            if self.tx(self.ledger.defundPool, self.pool, budget, self.admin, sender=self.admin) is None:
                self.stats[f"front-run defunds refused ({step})"] += 1
            else:
                self.stats[f"front-run defunds executed ({step})"] += 1
        self.defund_announced = budget

    def settle_defund(self) -> None:
        """A lease after its announcement the defund goes through; it takes only unreserved budget (what no lease
        holds and no submission reserved), and the owner funds the pool again so that the game goes on."""
        amount = min(getattr(self, "defund_announced", 0), int(self.ledger.pool(self.pool)["budget"]))
        self.defund_announced = 0
        if amount and self.tx(self.ledger.defundPool, self.pool, amount, self.admin, sender=self.admin):
            self.stats["announced defunds executed a lease later (unreserved budget only)"] += 1
            self.tx(self.ledger.fundPool, self.pool, amount, sender=self.admin, must=True)

    def plan(self, pl: Player) -> tuple[str, int] | None:
        """The class the worker's next claim will be judged by (its claim lands in the next block) and the
        seconds that task takes it at the least (the cherry-picker's cheapest seed: half)."""
        cls = self.judged(pl, self.web3.eth.block_number + 1)
        units = TASK_UNITS["gpu-small"] if pl.strategy == "overstated" else TASK_UNITS[cls]
        return cls, self.seconds_for(units * (0.5 if pl.strategy == "cherry-picker" else 1.0))

    def task(self, pl: Player, cls: str) -> tuple[int, int, bool, float]:
        """What `pl` submits for a claim judged as `cls`: (units it claims, seconds, bad, units generated)."""
        s = pl.strategy
        if s == "overstated":
            # writes its declared class's (gpu-large) budgets, truncated to what its real speed finishes in a
            # gpu-small task's time: judged by a lower class the file is wrong_problems, and truncated anyway
            generated = TASK_UNITS["gpu-small"]
            return TASK_UNITS["gpu-large"], self.seconds_for(generated), True, generated
        units = TASK_UNITS[cls]
        seconds = self.seconds_for(units)
        if s in CHEAT_RATE:
            bad = pl.rng.random() < CHEAT_RATE[s]
            return units, seconds, bad, units * (self.p.cheat_cost if bad else 1.0)
        return units, seconds, False, units

    # ---------------------------------------------------------------- one round
    def round(self, r: int) -> None:
        p = self.p
        subs: list[Sub] = []
        expiring: list[int] = []
        self.work_phase(subs, expiring)
        for _ in range(self.canaries_now(r)):
            got = self.claim(self.canary)
            if got is not None:
                self.submit(self.canary, got[0], UNITS, True, subs)
                self.stats["canaries"] += 1
        self.stats["submissions"] += len(subs)
        self.rng.shuffle(subs)
        honest = [v for v in self.validators if v.strategy == "honest"]
        lazy, malicious, volunteer = (next((v for v in self.validators if v.strategy == s), None)
                                      for s in ("lazy", "malicious", "volunteer"))
        spots = [v for v in self.validators if v.strategy.startswith("spot-")]
        assigned = next((v for v in self.validators if v.strategy == "assigned"), None)
        for sub in subs:  # each submission's slots (the agents' rule): who is paid for attesting it
            sub.assigned = [a.lower() for a in self.assigner.for_claim(*self.claims[sub.sid]) or []]
        for v in self.validators:  # who checks every submission pays for it (a spot checker 1/N of a full check)
            if v.strategy in ("volunteer", "malicious") or v in spots:
                v.cost += p.check_cost * len(subs) / v.spot()
                v.counts["checked"] += len(subs)
        # the honest nodes and the `assigned` one check only what they hold a slot of (validator.check: assigned)
        slot_of = {id(v): {s.sid for s in subs if v.node.address.lower() in s.assigned}
                   for v in [*honest, *([assigned] if assigned else [])]}
        for v in [*honest, *([assigned] if assigned else [])]:
            v.cost += p.check_cost * len(slot_of[id(v)])
            v.counts["checked"] += len(slot_of[id(v)])
        mine = slot_of[id(assigned)] if assigned else set()
        for sub in subs:  # what each spot checker finds: a bad row among N rows with probability 1/N
            for v in spots:
                if sub.bad and (not self.one_bad_row(sub) or v.rng.random() < 1 / v.spot()):
                    sub.seen_bad.add(id(v))
                    v.counts["bad found"] += 1
                elif sub.bad:
                    v.counts["bad missed"] += 1
        # attestations the trainer receives; it records (pays) those of the submission's assigned slots, a
        # validator once per slot it holds (adjacent), as `record_used_attestations` does
        for sub in subs:
            checkers = [v for v in honest if sub.sid in slot_of[id(v)]] + ([volunteer] if volunteer else []) + (
                [assigned] if sub.sid in mine else [])
            sub.attesters = ([lazy] if lazy else []) + ([] if sub.bad else checkers) + [
                v for v in spots if id(v) not in sub.seen_bad]
            attested = {v.node.address.lower(): v for v in sub.attesters}
            slots = sub.assigned
            self.stats["slots assigned"] += len(slots)
            listed = sorted(a for a in slots if a in attested)[:16]
            if listed and self.tx(self.book.recordAttestations, sub.sid, [attested[a].node for a in listed],
                                  sender=self.admin):
                self.reserved_attestations += len(listed)
                self.stats["slots recorded (paid)"] += len(listed)
                for a in listed:
                    sub.slots[attested[a].node.address] = sub.slots.get(attested[a].node.address, 0) + 1
                    attested[a].counts["slots recorded"] += 1
        # challenges: a bad submission by an honest node that holds a slot of it (alternating when both do), else by
        # the volunteer (it checks everything), else by nobody (a canary by the pool's key with --canary-challenger
        # pool); one good one by the malicious validator
        challenged: list[tuple[Sub, Player]] = []
        for i, sub in enumerate(s for s in subs if s.bad):
            holders = [v for v in honest[i % len(honest):] + honest[:i % len(honest)] if sub.sid in slot_of[id(v)]]
            who = (self.pool_challenger if self.pool_challenger and sub.player is self.canary
                   else holders[0] if holders else volunteer)
            if who is None:
                self.stats["bad work challenged by nobody (no honest slot, no volunteer)"] += 1
                continue
            if self.tx(self.ledger.challenge, sub.sid, "evidence", sender=who.node):
                challenged.append((sub, who))
        good = [s for s in subs if not s.bad and s.player.role == "worker"]
        if malicious and good and self.tx(self.ledger.challenge, good[0].sid, "fabricated", sender=malicious.node):
            challenged.append((good[0], malicious))
        for sub, challenger in challenged:
            for v in honest:  # every open round gets its vote: checked first when it holds no slot of the work
                if v is not challenger:
                    if sub.sid not in slot_of[id(v)]:
                        v.cost += p.check_cost
                        v.counts["checked for a vote"] += 1
                    self.tx(self.ledger.vote, sub.sid, sub.bad, sender=v.node)
            if volunteer and volunteer is not challenger:
                self.tx(self.ledger.vote, sub.sid, sub.bad, sender=volunteer.node)
            if malicious and challenger is not malicious:
                self.tx(self.ledger.vote, sub.sid, not sub.bad, sender=malicious.node)
            for v in spots:  # a challenge names its bad row (evidence): checking that one row, it votes the truth
                self.tx(self.ledger.vote, sub.sid, sub.bad, sender=v.node)
            if assigned and sub.sid in mine:  # it checked this one
                self.tx(self.ledger.vote, sub.sid, sub.bad, sender=assigned.node)
        self.advance(self.vote_s + 1)
        for sub, _ in challenged:
            self.tx(self.ledger.resolve, sub.sid, sender=self.admin)
            self.stats["upheld" if self.ledger.task(sub.sid)["status"] == 4 else "rejected"] += 1
        challenger_of = {sub.sid: who for sub, who in challenged}
        for sub, _ in challenged:
            upheld = self.ledger.task(sub.sid)["status"] == 4
            for v in self.validators:  # an honest validator reports the losing voters (reporter share)
                voted, uphold = self.ledger.voteOf(sub.sid, v.node)
                if voted and uphold != upheld and self.tx(self.book.slashVoter, sub.sid, v.node,
                                                          sender=honest[0].node):
                    v.counts["voter slashes"] += 1
                # the winning side (its voters, the challenger of an upheld round) claims its share of the pool's
                # reward per challenge, by stake weight
                won = (voted and uphold == upheld) or (upheld and v is challenger_of[sub.sid])
                if won and p.voter_reward > 0 and self.tx(self.book.claimVoterReward, sub.sid, v.node,
                                                          sender=v.node):
                    v.counts["winning vote shares paid"] += 1
            if upheld:  # the trainer holds the attesters' accepting signatures
                for v in sub.attesters:
                    reserved = self.book.recorded(sub.sid, v.node) > 0
                    if self.tx(self.book.slashAttester, sub.sid, v.node, *self.attestation(v, sub.sid),
                               sender=self.admin):
                        v.counts["attester slashes"] += 1
                        # the slash releases its reward (every slot of it) to the pool
                        self.reserved_attestations -= sub.slots.get(v.node.address, 0) if reserved else 0
        self.advance(self.window_s + 1)
        for sub in subs:
            status = self.ledger.task(sub.sid)["status"]
            if self.ledger.claimable(sub.sid):
                self.tx(self.ledger.claimRewards, [sub.sid], sender=sub.node)
            elif status == 2 and self.tx(self.ledger.voidSubmissions, [sub.sid], sender=self.admin):
                sub.player.counts["wiped"] += 1  # Submitted but void after a wipe
            status = self.ledger.task(sub.sid)["status"]
            for v in sub.attesters:
                if self.book.recorded(sub.sid, v.node):
                    held = sub.slots[v.node.address]  # recorded per slot: one reward each
                    if status in (4, 6):  # Upheld, Voided: the reward goes back to the pool
                        if self.tx(self.book.releaseAttesterReward, sub.sid, v.node, sender=self.admin):
                            self.reserved_attestations -= held
                    elif self.tx(self.book.claimAttesterReward, sub.sid, v.node, sender=v.node):
                        v.counts["attester rewards (slots paid)"] += held
                        self.reserved_attestations -= held
        self.advance(max(0, self.lease_s - self.window_s - self.vote_s) + 5)
        for tid in expiring:
            self.tx(self.ledger.expireLease, tid, sender=self.admin)
        self.settle_defund()
        for pl in [*self.players, self.canary] + ([self.pool_challenger] if self.pool_challenger else []):
            self.top_up(pl)
        self.check_books(r)

    @staticmethod
    def one_bad_row(sub: Sub) -> bool:
        """Whether bad work is bad in one row only (a cheater's junk and a canary, as real cheats and issue 33's
        canaries are) or in every row (the truncating overstater's files are all wrong_problems)."""
        return sub.player.strategy != "overstated"

    def attestation(self, v: Player, sid: int) -> tuple:
        from intellect.agents.attestation import sign_attestation

        a = sign_attestation(v.node.private_key, chain_id=self.chain.id, ledger=self.ledger.address,
                             submission_id=sid, rollouts_cid=CID, proofs_hash=PROOFS, policy_step=0)
        return (self.keccak(text=CID), PROOFS, 0, a.signature)

    def check_books(self, r: int) -> None:
        holders = {a.address for a in self.accounts}
        balances = sum(self.token.balanceOf(a) for a in holders)
        sm, led, book = (self.token.balanceOf(c) for c in (self.sm, self.ledger, self.book))
        supply = self.token.totalSupply()
        assert supply == self.minted, f"round {r}: supply {supply} != minted {self.minted}"
        assert balances + sm + led + book == supply, (
            f"round {r}: tokens outside the books ({balances + sm + led + book} != supply {supply})")
        assert sm == self.sm.totalStaked(), f"round {r}: StakeManager holds {sm}, totalStaked {self.sm.totalStaked()}"
        pool = self.ledger.pool(self.pool)
        assert led == pool["budget"] + pool["reserved"], f"round {r}: ledger holds {led} != budget + reserved"
        reward, budget = self.book.poolRule(self.pool)
        assert book == budget + self.reserved_attestations * reward, (
            f"round {r}: AttesterBook holds {book} != budget {budget} + {self.reserved_attestations} reserved rewards")
        self.book_lines.append(f"round {r + 1}: supply {supply} wei = holders {balances} + stakes {sm} "
                               f"+ ledger escrow {led} + attester escrow {book}: balanced")
        self.stats["rounds with the books balanced to the wei"] += 1

    # ---------------------------------------------------------------- the run
    def run(self) -> dict:
        for r in range(self.p.rounds):
            self.round(r)
            log.info("%s", self.book_lines[-1])
        seconds = self.now() - self.t0
        days = seconds / 86400
        rows: list[dict] = []
        for role in ("worker", "validator"):
            groups: dict[str, list[Player]] = defaultdict(list)
            for pl in self.players:
                if pl.role == role:
                    groups[pl.strategy].append(pl)
            for strategy, pls in groups.items():
                tokens = sum(self.wealth(pl) - pl.start for pl in pls) / self.TOKEN / len(pls)
                cost = sum(pl.cost for pl in pls) / len(pls)
                counts: dict[str, int] = defaultdict(int)
                for pl in pls:
                    for k, v in pl.counts.items():
                        counts[k] += v
                subs = max(1, self.stats["submissions"])
                rows.append({"role": role, "strategy": strategy, "nodes": len(pls), "tokens": tokens, "cost": cost,
                             "profit": tokens - cost, "per_day": (tokens - cost) / days,
                             "per_submission": (tokens - cost) / subs, "counts": dict(counts)})
        for role in ("worker", "validator"):
            mine = [r for r in rows if r["role"] == role]
            best = max((r["per_day"] for r in mine if r["strategy"] != "honest"), default=float("-inf"))
            honest = next(r for r in mine if r["strategy"] == "honest")
            for r in mine:
                r["honest_strictly_best"] = honest["per_day"] > best
        trainer = (self.trainer_wealth() - self.trainer_start) / self.TOKEN
        self.web3.provider.make_request("anvil_removeBlockTimestampInterval", [])
        return {"host": dict(self.host), "params": self.p.__dict__, "chain_seconds": seconds, "rows": rows, "trainer_per_day": trainer / days,
                "treasury": self.token.balanceOf(self.treasury) / self.TOKEN, "stats": dict(self.stats),
                "books": self.book_lines}


def table(result: dict) -> str:
    p = result["params"]
    rule = (f"budget class by the agents' rule over the last {p['class_history']} decided leases"
            if p["class_history"] > 0 else "budget class = the declaration (rule off)")
    lines = [f"{p['rounds']} rounds ({result['chain_seconds']} s of chain time), a work phase of {p['tasks']} gpu-small "
             f"tasks ({UNITS} units at {p['small_tps']:g} tokens/s) per worker per round, {rule}, seed {p['seed']}; costs: {p['unit_cost']} INTL/unit generated, "
             f"{p['check_cost']} INTL per check; attester reward {p['attester_reward']} INTL; "
             f"canaries: {canary_schedule(p)}, {result['stats'].get('canaries', 0)} of "
             f"{result['stats'].get('submissions', 0)} submissions (c = {canary_share(result):.1%}), challenged by "
             f"the {'pool' if p['canary_challenger'] == 'pool' else 'honest validators'}",
             "", "| role | strategy | nodes | tokens won (INTL/node) | costs | profit | profit per day | what happened |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for r in result["rows"]:
        what = ", ".join(f"{k} {v}" for k, v in sorted(r["counts"].items()))
        lines.append(f"| {r['role']} | {r['strategy']} | {r['nodes']} | {r['tokens']:.1f} | {r['cost']:.1f} | "
                     f"{r['profit']:.1f} | {r['per_day']:.0f} | {what} |")
    books = result["stats"].get("rounds with the books balanced to the wei", 0)
    lines += ["", "| role | honest (INTL/day) | best other strategy | its INTL/day | honest strictly best? | books |",
              "| --- | ---: | --- | ---: | --- | --- |"]
    for role in ("worker", "validator"):
        mine = [r for r in result["rows"] if r["role"] == role]
        honest = next(r for r in mine if r["strategy"] == "honest")
        others = [r for r in mine if r["strategy"] != "honest"]
        if not others:
            lines.append(f"| {role} | {honest['per_day']:.0f} | (honest only) | | | |")
            continue
        best = max(others, key=lambda r: r["per_day"])
        if honest["honest_strictly_best"]:
            verdict = "**yes**"
        elif best["per_day"] == honest["per_day"]:
            verdict = f"**NO**: {best['strategy']} earns exactly as much (a tie)"
        else:
            verdict = f"**NO**: {best['strategy']} earns more"
        lines.append(f"| {role} | {honest['per_day']:.0f} | {best['strategy']} | {best['per_day']:.0f} | {verdict} | "
                     f"balanced to the wei after each of {books} of {p['rounds']} rounds |")
    lines.append("")
    lines.append(f"- trainer (pool owner): {result['trainer_per_day']:.0f} INTL/day (rewards paid, canaries); "
                 f"treasury received {result['treasury']:.1f} INTL")
    lines.append(f"- books: balanced to the wei after each of {result['stats'].get('rounds with the books balanced to the wei', 0)} rounds")
    return "\n".join(lines)


def canary_schedule(p: dict) -> str:
    if p["canary_rate"] > 0:
        return f"{p['canaries']} in a round with probability {p['canary_rate']}"
    if p["canary_every"] <= 0 or p["canaries"] <= 0:
        return "none"
    return f"{p['canaries']} every {p['canary_every']} round(s)"


def canary_share(result: dict) -> float:
    """c: the canaries' share of all submissions of the run."""
    st = result["stats"]
    return st.get("canaries", 0) / max(1, st.get("submissions", 0))


# two-sided 95 % Student t quantiles by degrees of freedom (n - 1 seeds)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093, 20: 2.086}


def aggregate(results: list[dict]) -> list[dict]:
    """Per (role, strategy): the profit per day of every seed, its mean and the 95 % confidence interval of the
    mean (Student t over the seeds)."""
    by: dict[tuple[str, str], list[float]] = defaultdict(list)
    for res in results:
        for r in res["rows"]:
            by[r["role"], r["strategy"]].append(r["per_day"])
    out = []
    for (role, strategy), xs in by.items():
        n = len(xs)
        mean = sum(xs) / n
        sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1)) if n > 1 else 0.0
        half = T975.get(n - 1, 1.96) * sd / math.sqrt(n) if n > 1 else float("nan")
        out.append({"role": role, "strategy": strategy, "n": n, "mean": mean, "lo": mean - half, "hi": mean + half,
                    "min": min(xs), "max": max(xs), "per_seed": xs})
    return out


def seeds_table(results: list[dict], agg: list[dict]) -> str:
    seeds = [r["params"]["seed"] for r in results]
    books = sum(r["stats"].get("rounds with the books balanced to the wei", 0) for r in results)
    rounds = sum(r["params"]["rounds"] for r in results)
    lines = [f"{len(results)} seeds ({', '.join(map(str, seeds))}), {results[0]['params']['rounds']} rounds each; "
             f"profit per day (INTL) per node (per operator for the sybil), mean and 95 % CI over the seeds",
             "", "| role | strategy | mean | 95 % CI | min | max |", "| --- | --- | ---: | --- | ---: | ---: |"]
    for a in agg:
        lines.append(f"| {a['role']} | {a['strategy']} | {a['mean']:,.0f} | [{a['lo']:,.0f}, {a['hi']:,.0f}] | "
                     f"{a['min']:,.0f} | {a['max']:,.0f} |")
    lines += ["", "| role | honest mean [CI] | best other strategy | its mean [CI] | honest strictly best? |",
              "| --- | --- | --- | --- | --- |"]
    for role in ("worker", "validator"):
        mine = [a for a in agg if a["role"] == role]
        honest = next((a for a in mine if a["strategy"] == "honest"), None)
        if honest is None:
            continue
        # a strategy that earned honest's figure in every seed is an exact tie (the patient overstater), not a rival
        ties = [a["strategy"] for a in mine if a["strategy"] != "honest" and a["per_seed"] == honest["per_seed"]]
        others = [a for a in mine if a["strategy"] != "honest" and a["strategy"] not in ties]
        if not others:
            continue
        best = max(others, key=lambda a: a["hi"])
        if honest["lo"] > max(a["hi"] for a in others):
            verdict = "**yes**: honest's interval is above every other's"
        elif all(honest["mean"] > a["mean"] for a in others):
            verdict = "on the mean only: intervals overlap"
        else:
            verdict = "**NO**"
        if ties:
            verdict += f"; exact tie in every seed: {', '.join(ties)}"
        lines.append(f"| {role} | {honest['mean']:,.0f} [{honest['lo']:,.0f}, {honest['hi']:,.0f}] | {best['strategy']} | "
                     f"{best['mean']:,.0f} [{best['lo']:,.0f}, {best['hi']:,.0f}] | {verdict} |")
    stats: dict[str, int] = defaultdict(int)
    for r in results:
        for k, v in r["stats"].items():
            stats[k] += v
    lines += ["", f"- books: balanced to the wei after {books} of {rounds} rounds",
              "- outcomes over all seeds: " + json.dumps(dict(sorted(stats.items())))]
    return "\n".join(lines)


def parse_seeds(text: str) -> list[int]:
    """'1-10' or '1,2,5' (or a mix) as a list of seeds."""
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += list(range(int(a), int(b) + 1)) if b else [int(a)]
    return out


def run(p: Params) -> dict:
    """Deploys on the connected brownie network and plays `p.rounds` rounds (the smoke test calls this)."""
    return Sim(p).run()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    d = Params()
    helps = {"workers": f"comma-separated worker strategies, 'honest' required; known: {', '.join(WORKERS)}",
             "validators": "comma-separated validator strategies, 'honest' required (two nodes playing the agent's "
                           "validator.check: assigned); 'volunteer' is the agent's validator.check: all (one node); "
                           f"known: {', '.join(VALIDATORS)}"}
    for name, value in d.__dict__.items():
        ap.add_argument("--" + name.replace("_", "-"), type=type(value), default=value,
                        help=helps.get(name, "").replace("%", "%%") or None)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--seeds", default=None,
                    help="several seeds ('1-10', '1,3'): a fresh chain each, then every strategy's mean and 95 %% CI")
    args = ap.parse_args()
    p = Params(**{k: getattr(args, k) for k in d.__dict__})
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("intellect").setLevel(logging.WARNING)  # BudgetClasses logs every clipped claim
    warnings.filterwarnings("ignore", category=FutureWarning)
    from brownie import network, project

    from scripts._anvil import use_private_anvil_port

    proj = project.load(str(ROOT), name="IntellectProtocol")
    proj.load_config()
    use_private_anvil_port()  # our own anvil, never another session's on 8545
    from brownie._config import CONFIG

    dev = CONFIG.networks["development"]
    if "--timestamp" not in dev["cmd"]:  # a fixed genesis: the chain's block hashes follow from the seed alone
        dev["cmd"] = f"{dev['cmd']} --timestamp {GENESIS_TIME}"
    results = []
    for seed in parse_seeds(args.seeds) if args.seeds else [p.seed]:
        ps = Params(**{**p.__dict__, "seed": seed})
        started = time.monotonic()
        with contextlib.redirect_stdout(io.StringIO()):  # brownie prints every transaction
            network.connect("development")
            try:
                result = run(ps)
            finally:
                network.disconnect()
        result["wall_seconds"] = round(time.monotonic() - started, 1)
        results.append(result)
        print()
        print(table(result))
        print("refusals and outcomes:", json.dumps(result["stats"], sort_keys=True))
        print(f"host (not part of the result): wall time {result['wall_seconds']} s, "
              f"{json.dumps(result['host'], sort_keys=True)}", flush=True)
    out: Any = results[0]
    if len(results) > 1:
        agg = aggregate(results)
        print()
        print(seeds_table(results, agg))
        out = {"seeds": results, "aggregate": agg}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
