"""`Protocol`: the typed client of the intellect contracts (token, registry, stake, ledger, attester book).

    from intellect.sdk import Protocol
    p = Protocol.connect("development", dev_account=0)        # or keystore="me.json"
    p.register_node("worker", gpu_model="cpu")
    p.stake(p.address, parse_tokens("100"))
    claim = p.claim_task(pool_id=1); print(claim.seed.hex())

Every call returns a pydantic model or a plain value; a revert raises `ContractRevert` carrying
the contract's custom error name and arguments; transient RPC failures are retried.

The class is split by concern (issue 34): this module holds construction, the low-level calls, transactions and
events, and the ledger's tasks, challenges and rewards; `Protocol` mixes in `_client_token._TokenCalls` (token,
faucet, permits, access control), `_client_registry._RegistryCalls` (nodes and stake), `_client_pools._PoolCalls`
(pools and checkpoints) and `_client_attesters._AttesterCalls` (the attester book). Every method stays public on
`Protocol` under its name and signature.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from eth_abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_account.signers.local import LocalAccount
from hexbytes import HexBytes
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError, Web3Exception
from web3.types import RPCEndpoint

from ._accounts import dev_account, load_keystore
from ._client_attesters import AttesterClaimCursor, _AttesterCalls
from ._client_pools import _PoolCalls
from ._client_registry import _RegistryCalls
from ._client_token import _TokenCalls
from ._client_util import (
    _ANSWER_FAILURES,
    _abi_type,
    _addr,
    _built,
    _field,
    _hex_bytes,
    _norm,
    _plain,
    _static_type,
)
from ._config import (
    CONTRACT_NAMES,
    DEV_CHAIN_IDS,
    OPTIONAL_CONTRACT_NAMES,
    Deployment,
    NetworkSpec,
    load_abi,
    load_deployment,
    resolve_network,
)
from ._errors import ConfigError, ContractRevert, IntellectError, RpcError
from ._models import (
    Challenge,
    ChallengeStatus,
    DecodedEvent,
    NodeBook,
    Receipt,
    Rewards,
    Submission,
    Task,
    TaskClaim,
    TaskStatus,
    claim_seed,
)
from ._tx import ErrorDecoder, RetryPolicy, Transactor, redact_url, with_retries
from .network import NetworkDescriptor, check_on_chain, load_network

__all__ = ["Protocol"]

T = TypeVar("T")

log = logging.getLogger(__name__)
_LOG_CHUNK = 10_000  # blocks per eth_getLogs request


def _web3(url: str, request_timeout: float) -> Web3:
    """A web3 client of `url` whose requests time out after `request_timeout` s; retries are ours (`with_retries`).

    `eth_chainId` is answered from web3's request cache after its first request: web3 asks it around every call and
    transaction, and it was a third of a worker's and two thirds of a validator's requests (bench/scale/chain_load.py);
    a provider bills each one. `Protocol` checks the chain id against the deployment when it connects."""
    return Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": request_timeout}, exception_retry_configuration=None,
                                  cache_allowed_requests=True, cacheable_requests={RPCEndpoint("eth_chainId")}))


def _first_answering(urls: Sequence[str], request_timeout: float, retry: RetryPolicy) -> tuple[Web3, str, int]:
    """(web3, URL, chain id) of the first of `urls` whose node answers; the last failure if none does."""
    last: Exception | None = None
    for i, url in enumerate(urls):
        w3 = _web3(url, request_timeout)
        # every URL but the last gets two tries: a dead one must not hold the joiner for a whole backoff
        policy = retry if i == len(urls) - 1 else RetryPolicy(attempts=2, base_delay=retry.base_delay)
        try:
            return w3, url, int(with_retries(lambda w3=w3: w3.eth.chain_id, policy, f"connect to {redact_url(url)}"))
        except Exception as exc:  # the next URL may answer; the last failure is what the caller sees
            last = exc if isinstance(exc, RpcError) else RpcError(
                f"connect to {redact_url(url)}: {type(exc).__name__}: {exc}")
            log.warning("%s", last)
    if last is None:
        raise ConfigError("the network descriptor names no RPC URL")
    raise last


class Protocol(_TokenCalls, _RegistryCalls, _PoolCalls, _AttesterCalls):
    """Typed access to one deployment of the intellect contracts, optionally as one signing account."""

    #: blocks per eth_getLogs request of `get_events`: lower it (on the instance) for an RPC provider that caps
    #: the block range of a log query below this
    log_chunk: int = _LOG_CHUNK

    def __init__(self, w3: Web3, deployment: Deployment, account: LocalAccount | None = None, *,
                 network: NetworkSpec | None = None, rpc_url: str = "", retry: RetryPolicy | None = None,
                 max_fee_per_gas: int | None = None, receipt_timeout: float = 120.0) -> None:
        self.w3 = w3
        self.deployment = deployment
        self.network = network
        self.rpc_url = rpc_url
        self.retry = retry or RetryPolicy()
        self.chain_id = deployment.chain_id
        self.abis = {name: load_abi(name) for name in (*CONTRACT_NAMES, *OPTIONAL_CONTRACT_NAMES)}
        present = [*CONTRACT_NAMES, *(n for n in OPTIONAL_CONTRACT_NAMES if n in deployment.contracts)]
        self.contracts: dict[str, Contract] = {
            name: w3.eth.contract(address=_addr(deployment.address(name)), abi=self.abis[name])
            for name in present
        }
        self.decoder = ErrorDecoder(self.abis.values())
        self._by_address = {c.address.lower(): name for name, c in self.contracts.items()}
        self._topics: dict[bytes, tuple[str, str]] = {}
        for name in self.contracts:
            for item in self.abis[name]:
                if item.get("type") == "event" and not item.get("anonymous"):
                    types = ",".join(_abi_type(i) for i in item["inputs"])
                    self._topics[bytes(Web3.keccak(text=f"{item['name']}({types})"))] = (name, item["name"])
        self.account = account
        self._electorates: dict[int, int] = {}  # snapshot block -> total validator weight (challenge_info)
        self._attester_cursors: dict[str, AttesterClaimCursor] = {}  # validator -> claim_attester_rewards' state
        self._tx = (Transactor(w3, account, self.decoder, chain_id=self.chain_id, retry=self.retry,
                               max_fee_per_gas=max_fee_per_gas, receipt_timeout=receipt_timeout)
                    if account is not None else None)

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def connect(cls, network: str | None = "development", *, rpc_url: str | None = None,
                deployment: Deployment | Path | str | None = None, account: LocalAccount | None = None,
                keystore: Path | str | None = None, password: str | None = None,
                password_file: Path | str | None = None, dev_account_index: int | None = None,
                max_fee_gwei: float | None = None, request_timeout: float = 30.0,
                retry: RetryPolicy | None = None, receipt_timeout: float = 120.0,
                descriptor: NetworkDescriptor | Path | str | None = None) -> Protocol:
        """Connect by network name (`development`, `base-sepolia`, `base-mainnet`) or RPC URL, or by the
        network's signed descriptor (`intellect.sdk.network`: its path or URL, or the loaded descriptor), which
        gives the RPC URLs (tried in order; `rpc_url` overrides them) and the deployment; the descriptor's signer
        must be the admin of the network's token on the chain that answers.

        The account is `account`, else a decrypted `keystore`, else anvil's dev account
        `dev_account_index` (local dev chains only), else none (read-only).
        """
        retry = retry or RetryPolicy()
        if descriptor is not None:
            desc = descriptor if isinstance(descriptor, NetworkDescriptor) else load_network(descriptor)
            spec, deployment = None, desc.deployment
            w3, url, chain_id = _first_answering([rpc_url] if rpc_url else desc.rpc_urls, request_timeout,
                                                     retry)
        else:
            desc = None
            spec, url = resolve_network(network, rpc_url)
            w3 = _web3(url, request_timeout)
            chain_id = int(with_retries(lambda: w3.eth.chain_id, retry, f"connect to {redact_url(url)}"))
        if spec is not None and spec.chain_id != chain_id:
            raise ConfigError(f"{redact_url(url)} is chain {chain_id}, not {spec.name} ({spec.chain_id}): check --rpc-url")
        if isinstance(deployment, Deployment):
            dep = deployment
            if dep.chain_id != chain_id:
                raise ConfigError(f"deployment is for chain {dep.chain_id}, the node at {redact_url(url)} is chain {chain_id}")
        else:
            dep = load_deployment(chain_id, deployment)
        if account is None and keystore is not None:
            account = load_keystore(keystore, password, password_file)
        if account is None and dev_account_index is not None:
            if chain_id not in DEV_CHAIN_IDS:
                raise ConfigError(f"dev accounts exist only on local dev chains, not chain {chain_id}; use --keystore")
            account = dev_account(dev_account_index)
        max_fee = int(max_fee_gwei * 10**9) if max_fee_gwei is not None else None
        protocol = cls(w3, dep, account, network=spec, rpc_url=url, retry=retry, max_fee_per_gas=max_fee,
                       receipt_timeout=receipt_timeout)
        if desc is not None:
            check_on_chain(desc, protocol)
        return protocol

    def with_account(self, account: LocalAccount) -> Protocol:
        """The same connection acting as another account (its own nonce manager)."""
        return Protocol(self.w3, self.deployment, account, network=self.network, rpc_url=self.rpc_url,
                        retry=self.retry, max_fee_per_gas=self._tx.max_fee_per_gas if self._tx else None,
                        receipt_timeout=self._tx.receipt_timeout if self._tx else 120.0)

    @property
    def address(self) -> str:
        """The signing account's address."""
        if self.account is None:
            raise ConfigError("no account: pass --keystore (or --dev-account on a local chain)")
        return str(self.account.address)

    @property
    def is_dev_chain(self) -> bool:
        return self.chain_id in DEV_CHAIN_IDS

    # -- low level ----------------------------------------------------------------------------------
    def call(self, contract: str, function: str, *args: Any, block: int | str = "latest") -> Any:
        """Call a view function; a revert raises ContractRevert."""
        fn = self.contracts[contract].functions[function](*args)
        try:
            return self._ask(lambda: fn.call({"from": self.account.address} if self.account else {},
                                             block_identifier=block), f"{contract}.{function}")
        except ContractLogicError as exc:
            raise self.decoder.from_exception(exc, function=function, contract=contract) from None

    def _ask(self, fn: Callable[[], T], what: str) -> T:
        """`fn()` (one RPC request and what is made of its answer), transient failures retried; an answer web3
        cannot read (not JSON or not UTF-8, a wrong shape or id, garbage return data) raises RpcError naming
        `what` and the node. A revert (ContractLogicError) passes through for the caller to decode."""
        try:
            return with_retries(fn, self.retry, what)
        except (ContractLogicError, IntellectError):
            raise
        except _ANSWER_FAILURES as exc:
            raise RpcError(f"{what}: unreadable answer from the RPC node {redact_url(self.rpc_url)}: "
                           f"{type(exc).__name__}: {str(exc)[:300]}") from None

    def transact(self, contract: str, function: str, *args: Any, wait: bool = True,
                 timeout: float | None = None) -> Receipt:
        """Send a transaction and (by default) wait for its receipt; returns the decoded events."""
        if self._tx is None:
            raise ConfigError(f"{contract}.{function} needs an account: pass --keystore (or --dev-account)")
        fn = self.contracts[contract].functions[function](*args)
        tx_hash = self._tx.send(fn, contract=contract, function=function)
        log.info("%s.%s sent: %s", contract, function, tx_hash)
        if not wait:
            return Receipt(tx_hash=tx_hash, block_number=-1, gas_used=0, effective_gas_price=0)
        rc = self._tx.wait(tx_hash, fn_for_replay=fn, contract=contract, function=function, timeout=timeout)
        try:  # decode_log raises RpcError itself on a log it cannot read
            events = [e for e in (self.decode_log(lg) for lg in rc["logs"]) if e is not None]
            return Receipt(tx_hash=tx_hash, block_number=rc["blockNumber"], gas_used=rc["gasUsed"],
                           effective_gas_price=rc.get("effectiveGasPrice", 0) or 0, events=events)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:  # ValueError: pydantic's ValidationError
            raise RpcError(f"receipt of {tx_hash} from the RPC node is malformed: {type(exc).__name__}: {exc}") from None

    def decode_log(self, lg: Any) -> DecodedEvent | None:
        """Decode one raw log of a protocol contract (None for other contracts' logs); `RpcError` naming
        the log when the node's answer is not a log of ours (only a broken or lying node sends that)."""
        try:
            name = self._by_address.get(str(lg["address"]).lower())
            topics = lg["topics"]
            if name is None or not topics:
                return None
            key = self._topics.get(bytes(HexBytes(topics[0])))
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise RpcError(f"RPC returned a malformed log ({type(exc).__name__}: {exc})") from exc
        if key is None or key[0] != name:
            return None
        where = f"{name}.{key[1]} log (block {_field(lg, 'blockNumber')}, index {_field(lg, 'logIndex')})"
        try:
            ev = self.contracts[name].events[key[1]]().process_log(lg)
            args = _plain(dict(ev["args"]))
            if key[1] == "TaskClaimed":  # the seed follows from the claim's block hash (not in the log's data)
                args["seed"] = claim_seed(bytes(lg["blockHash"]), args["node"], args["taskId"]).hex()
            return DecodedEvent(contract=name, event=key[1], args=args,
                                block_number=int(lg["blockNumber"]), block_hash="0x" + bytes(lg["blockHash"]).hex(),
                                log_index=int(lg["logIndex"]), tx_hash="0x" + bytes(lg["transactionHash"]).hex())
        except (Web3Exception, DecodingError, KeyError, ValueError, TypeError, OverflowError) as exc:
            # ValueError covers pydantic's ValidationError of DecodedEvent
            raise RpcError(f"RPC returned an undecodable {where}: {type(exc).__name__}: {exc}") from None

    def event_topics(self, events: Iterable[str] | None = None) -> dict[bytes, tuple[str, str]]:
        """topic0 -> (contract, event) for the named events (all protocol events when None)."""
        wanted = set(events) if events is not None else None
        out = {t: v for t, v in self._topics.items() if wanted is None or v[1] in wanted}
        if wanted is not None:
            unknown = wanted - {v[1] for v in out.values()}
            if unknown:
                raise ConfigError(f"unknown event(s): {', '.join(sorted(unknown))}")
        return out

    def get_events(self, events: Iterable[str] | None = None, *, from_block: int | None = None,
                   to_block: int | str = "latest", filters: dict[str, Any] | None = None) -> list[DecodedEvent]:
        """Decoded protocol events in chain order (chunked eth_getLogs), filtered by argument values."""
        topics = self.event_topics(events)
        start = self.deployment.block if from_block is None else from_block
        end = self.block_number() if to_block == "latest" else int(to_block)
        addresses = sorted({self.contracts[c].address for c, _ in topics.values()})
        topic_filter: list[Any] = [["0x" + t.hex() for t in topics]]
        if filters and len(topics) == 1:  # one event: let the node filter on its indexed arguments
            (contract, event), = topics.values()
            topic_filter += self._indexed_topics(contract, event, filters)
        out: list[DecodedEvent] = []
        chunk = max(1, int(self.log_chunk))
        for lo in range(start, end + 1, chunk):
            hi = min(end, lo + chunk - 1)
            params = {"fromBlock": lo, "toBlock": hi, "address": addresses, "topics": topic_filter}
            logs = self._ask(lambda p=params: list(self.w3.eth.get_logs(p)), "eth_getLogs")
            for lg in logs:
                ev = self.decode_log(lg)
                if ev is None:
                    continue
                if filters and any(_norm(ev.args.get(k)) != _norm(v) for k, v in filters.items()):
                    continue
                out.append(ev)
        out.sort(key=lambda e: e.position)
        return out

    def _indexed_topics(self, contract: str, event: str, filters: dict[str, Any]) -> list[str | None]:
        """topic1..3 for the indexed arguments named in `filters` (None = any); trailing Nones dropped."""
        item = next(i for i in self.abis[contract] if i.get("type") == "event" and i["name"] == event)
        out: list[str | None] = []
        for inp in (i for i in item["inputs"] if i.get("indexed")):
            value = filters.get(inp["name"])
            if value is None or not _static_type(inp["type"]):
                out.append(None)
            else:
                out.append("0x" + abi_encode([inp["type"]], [_addr(value) if inp["type"] == "address" else value]).hex())
        while out and out[-1] is None:
            out.pop()
        return out

    def block_number(self) -> int:
        return self._ask(lambda: int(self.w3.eth.block_number), "block_number")

    def chain_time(self) -> int:
        """Timestamp of the latest block."""
        return self._ask(lambda: int(self.w3.eth.get_block("latest")["timestamp"]), "get_block")

    def eth_balance(self, address: str | None = None) -> int:
        a = _addr(address or self.address)
        return self._ask(lambda: int(self.w3.eth.get_balance(a)), "get_balance")

    # -- TaskLedger: tasks and submissions --------------------------------------------------------
    def claim_task(self, pool_id: int) -> TaskClaim:
        """Claim a task for this account's worker node; the seed comes from the TaskClaimed event."""
        rc = self.transact("TaskLedger", "claimTask", int(pool_id))
        e = rc.event("TaskClaimed")
        seed = e.args["seed"]
        return TaskClaim(task_id=e.args["taskId"], pool_id=e.args["poolId"], node=e.args["node"],
                         seed=_hex_bytes(seed),
                         lease_expiry=e.args["leaseExpiry"], tx_hash=rc.tx_hash, block_number=rc.block_number)

    def submit_work(self, task_id: int, rollouts_cid: str, proofs_hash: bytes, work_units: int,
                    policy_step: int) -> Submission:
        if len(proofs_hash) != 32:
            raise ValueError(f"proofs_hash must be 32 bytes, got {len(proofs_hash)}")
        rc = self.transact("TaskLedger", "submitWork", int(task_id), rollouts_cid, bytes(proofs_hash),
                           int(work_units), int(policy_step))
        return self._submission(rc.event("WorkSubmitted"), status=TaskStatus.SUBMITTED)

    def task_claim(self, task_id: int, *, to_block: int | str = "latest") -> TaskClaim | None:
        """The claim of task `task_id` (its block and seed) from its TaskClaimed event; None if none (up to
        `to_block`)."""
        evs = self.get_events(["TaskClaimed"], to_block=to_block, filters={"taskId": int(task_id)})
        if not evs:
            return None
        e = evs[-1]
        return TaskClaim(task_id=e.args["taskId"], pool_id=e.args["poolId"], node=e.args["node"],
                         seed=_hex_bytes(e.args["seed"]), lease_expiry=e.args["leaseExpiry"], tx_hash=e.tx_hash,
                         block_number=e.block_number)

    def task(self, task_id: int) -> Task:
        v = self.call("TaskLedger", "task", int(task_id))
        return _built("TaskLedger.task", lambda: Task(
            task_id=task_id, node=v[0], pool_id=v[1], lease_expiry=v[2], status=TaskStatus(v[3]), reward=v[4],
            window_end=v[5], slash_epoch=v[6]))

    def known_task(self, task_id: int) -> Task | None:
        """`task`, or None when the ledger has no such task: an id this node saw (in its own records, in events
        it read) that the chain no longer holds, because it lost the block (an RPC node restarted from an older
        state, a reorg). Callers forget such a task instead of asking about it on every pass; any other failure
        is raised."""
        try:
            t = self.task(task_id)
        except ContractRevert as exc:
            if exc.name != "TaskLedgerUnknownTask":
                raise
            return None
        return None if t.status == TaskStatus.NONE else t

    def next_task_id(self) -> int:
        return int(self.call("TaskLedger", "nextTaskId"))

    def slash_epoch(self, node: str) -> int:
        return int(self.call("TaskLedger", "slashEpoch", _addr(node)))

    def _submission(self, e: DecodedEvent, status: TaskStatus | None = None) -> Submission:
        a = e.args
        ph = a["proofsHash"]
        return Submission(submission_id=a["submissionId"], pool_id=a["poolId"], node=a["node"],
                          rollouts_cid=a["rolloutsCid"], proofs_hash=_hex_bytes(ph),
                          work_units=a["workUnits"], policy_step=a["policyStep"], reward=a["reward"],
                          window_end=a["windowEnd"], block_number=e.block_number, tx_hash=e.tx_hash, status=status)

    def submissions(self, *, pool_id: int | None = None, node: str | None = None, from_block: int | None = None,
                    with_status: bool = True) -> list[Submission]:
        """WorkSubmitted events (optionally of one pool / node), with each task's current status."""
        filters: dict[str, Any] = {}
        if pool_id is not None:
            filters["poolId"] = int(pool_id)
        if node is not None:
            filters["node"] = _addr(node)
        evs = self.get_events(["WorkSubmitted"], from_block=from_block, filters=filters)
        return [self._submission(e, self.task(e.args["submissionId"]).status if with_status else None) for e in evs]

    # -- TaskLedger: challenges -----------------------------------------------------------------
    def challenge(self, submission_id: int, evidence_cid: str, *, approve: bool = True) -> Challenge:
        """Challenge a submission (this account's validator node); posts the pool's bond."""
        if approve:
            bond = self.pool(self.task(submission_id).pool_id).params.challenge_bond
            if bond:
                self._ensure_allowance("TaskLedger", bond)
        self.transact("TaskLedger", "challenge", int(submission_id), evidence_cid)
        return self.challenge_info(submission_id)

    def vote(self, challenge_id: int, uphold: bool) -> Challenge:
        self.transact("TaskLedger", "vote", int(challenge_id), bool(uphold))
        return self.challenge_info(challenge_id)

    def resolve(self, challenge_id: int) -> bool:
        rc = self.transact("TaskLedger", "resolve", int(challenge_id))
        return bool(rc.event("ChallengeResolved").args["upheld"])

    def challenge_info(self, challenge_id: int) -> Challenge:
        """The challenge's latest round: one `challengeInfo` read, plus, while it is open, one eth_call of
        `resolve` for `resolvable`. The electorate (all validator weight at the round's snapshot block, a past
        block: it never changes unless the chain reorganises under it) is read once per snapshot block."""
        v = self.call("TaskLedger", "challengeInfo", int(challenge_id))
        electorate = self._electorate_at(int(v[7]))
        resolvable = False
        if int(v[4]) == ChallengeStatus.OPEN:
            try:  # the ledger resolves early only once no vote can change the outcome: ask it
                self.call("TaskLedger", "resolve", int(challenge_id))
                resolvable = True
            except ContractRevert:
                pass
        return _built("TaskLedger.challengeInfo", lambda: Challenge(
            challenge_id=challenge_id, challenger=v[0], vote_end=v[1], votes_for=v[2], votes_against=v[3],
            status=ChallengeStatus(v[4]), weight_for=v[5], weight_against=v[6], electorate=electorate,
            snapshot_block=v[7], round=v[8], resolvable=resolvable))

    def _electorate_at(self, snapshot_block: int) -> int:
        """`StakeManager.totalValidatorWeightAt(snapshot_block)`, cached (a challenge snapshots the block before
        its opening: checkpointed, so fixed once read). Bounded: emptied when 256 blocks are held (a dict's get,
        set and clear are each atomic, so the agents' threads may share it)."""
        cached = self._electorates.get(snapshot_block)
        if cached is None:
            cached = int(self.call("StakeManager", "totalValidatorWeightAt", snapshot_block))
            if len(self._electorates) >= 256:
                self._electorates.clear()
            self._electorates[snapshot_block] = cached
        return cached

    def expire_lease(self, task_id: int) -> Receipt:
        """Free the lease slot of a task whose lease ran out unsubmitted (anyone)."""
        return self.transact("TaskLedger", "expireLease", int(task_id))

    def node_book(self, node: str | None = None, pool_id: int = 1) -> NodeBook:
        """A node's reservations, open and expired leases and claims in a pool."""
        v = self.call("TaskLedger", "nodeBook", _addr(node or self.address), int(pool_id))
        return NodeBook(reserved=v[0], open_leases=v[1], expired_leases=v[2], claims=v[3])

    def has_voted(self, challenge_id: int, validator: str) -> bool:
        """Whether `validator` voted in the challenge's current round (its challenger counts as voted)."""
        v = self.call("TaskLedger", "challengeInfo", int(challenge_id))
        if str(v[0]).lower() == _addr(validator).lower():
            return True
        voted_round, _ = self.call("TaskLedger", "voteOf", int(challenge_id), _addr(validator))
        return int(voted_round) != 0 and int(voted_round) == int(v[8])

    def vote_of(self, challenge_id: int, validator: str) -> tuple[int, bool]:
        """The round `validator` last voted in on the challenge (0: never) and whether it voted to uphold."""
        r, uphold = self.call("TaskLedger", "voteOf", int(challenge_id), _addr(validator))
        return int(r), bool(uphold)

    # -- TaskLedger: rewards --------------------------------------------------------------------
    def claimable(self, submission_id: int) -> int:
        return int(self.call("TaskLedger", "claimable", int(submission_id)))

    def claim_rewards(self, submission_ids: Sequence[int]) -> int:
        """Pay finalised rewards to the nodes' owner; returns the total paid."""
        if not submission_ids:
            return 0
        rc = self.transact("TaskLedger", "claimRewards", [int(i) for i in submission_ids])
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "RewardClaimed")

    def void_submissions(self, submission_ids: Sequence[int]) -> int:
        rc = self.transact("TaskLedger", "voidSubmissions", [int(i) for i in submission_ids])
        return sum(int(e.args["released"]) for e in rc.events if e.event == "SubmissionVoided")

    def rewards(self, node: str | None = None, *, from_block: int | None = None) -> Rewards:
        """A node's rewards from its WorkSubmitted events: claimable now, pending, paid."""
        a = _addr(node or self.address)
        claimable_ids, pending_ids = [], []
        claimable = pending = paid = 0
        for sub in self.submissions(node=a, from_block=from_block):
            if sub.status == TaskStatus.PAID:
                paid += sub.reward
                continue
            if sub.status in (TaskStatus.SUBMITTED, TaskStatus.CHALLENGED):
                amount = self.claimable(sub.submission_id)
                if amount:
                    claimable += amount
                    claimable_ids.append(sub.submission_id)
                else:
                    pending += sub.reward
                    pending_ids.append(sub.submission_id)
        return Rewards(node=a, claimable=claimable, claimable_ids=claimable_ids, pending=pending,
                       pending_ids=pending_ids, paid=paid)

    def claim_all_rewards(self, node: str | None = None) -> int:
        return self.claim_rewards(self.rewards(node).claimable_ids)
