"""`Protocol`: the typed client of the intellect contracts (token, registry, stake, ledger, attester book).

    from intellect.sdk import Protocol
    p = Protocol.connect("development", dev_account=0)        # or keystore="me.json"
    p.register_node("worker", gpu_model="cpu")
    p.stake(p.address, parse_tokens("100"))
    claim = p.claim_task(pool_id=1); print(claim.seed.hex())

Every call returns a pydantic model or a plain value; a revert raises `ContractRevert` carrying
the contract's custom error name and arguments; transient RPC failures are retried.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from eth_abi import encode as abi_encode
from eth_abi.exceptions import DecodingError
from eth_account import Account
from eth_account.signers.local import LocalAccount
from hexbytes import HexBytes
from pydantic import BaseModel, Field
from web3 import Web3
from web3.contract import Contract
from web3.exceptions import ContractLogicError, Web3Exception

from ._accounts import dev_account, load_keystore
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
from ._events import write_atomic
from ._models import (
    AttesterPoolRule,
    AttesterRecord,
    Challenge,
    ChallengeStatus,
    Checkpoint,
    DecodedEvent,
    FaucetInfo,
    Node,
    NodeBook,
    NodeStatus,
    Pool,
    PoolParams,
    PoolState,
    PoolStatus,
    Receipt,
    Rewards,
    Role,
    Stake,
    Submission,
    Task,
    TaskClaim,
    TaskStatus,
    claim_seed,
)
from ._tx import ErrorDecoder, RetryPolicy, Transactor, redact_url, with_retries

__all__ = ["Protocol"]

T = TypeVar("T")

log = logging.getLogger(__name__)
_LOG_CHUNK = 10_000  # blocks per eth_getLogs request


def _addr(a: str) -> str:
    try:
        return str(Web3.to_checksum_address(a))
    except (ValueError, TypeError):
        raise ConfigError(f"not an address: {a!r} (expected 0x followed by 40 hex digits)") from None


class AttesterClaimCursor(BaseModel):
    """Where `Protocol.claim_attester_rewards` stands for one validator: the last block whose AttestationRecorded
    events it scanned, and its unsettled records (submission id -> the window's end, -1 while not read)."""

    chain_id: int
    validator: str
    scanned_to: int
    pending: dict[int, int] = Field(default_factory=dict)


class Protocol:
    """Typed access to one deployment of the intellect contracts, optionally as one signing account."""

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
                retry: RetryPolicy | None = None, receipt_timeout: float = 120.0) -> Protocol:
        """Connect by network name (`development`, `base-sepolia`, `base-mainnet`) or RPC URL.

        The account is `account`, else a decrypted `keystore`, else anvil's dev account
        `dev_account_index` (local dev chains only), else none (read-only).
        """
        spec, url = resolve_network(network, rpc_url)
        w3 = Web3(Web3.HTTPProvider(url, request_kwargs={"timeout": request_timeout},
                                    exception_retry_configuration=None))
        retry = retry or RetryPolicy()
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
        return cls(w3, dep, account, network=spec, rpc_url=url, retry=retry, max_fee_per_gas=max_fee,
                   receipt_timeout=receipt_timeout)

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
        for lo in range(start, end + 1, _LOG_CHUNK):
            hi = min(end, lo + _LOG_CHUNK - 1)
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

    # -- IntellectToken -------------------------------------------------------------------------
    def balance_of(self, account: str | None = None) -> int:
        return int(self.call("IntellectToken", "balanceOf", _addr(account or self.address)))

    def allowance(self, owner: str, spender: str) -> int:
        return int(self.call("IntellectToken", "allowance", _addr(owner), _addr(spender)))

    def total_supply(self) -> int:
        return int(self.call("IntellectToken", "totalSupply"))

    def approve(self, spender: str, amount: int) -> Receipt:
        return self.transact("IntellectToken", "approve", _addr(spender), int(amount))

    def transfer(self, to: str, amount: int) -> Receipt:
        return self.transact("IntellectToken", "transfer", _addr(to), int(amount))

    def mint(self, to: str, amount: int) -> Receipt:
        """MINTER_ROLE only."""
        return self.transact("IntellectToken", "mint", _addr(to), int(amount))

    def drip(self) -> int:
        """The dev faucet: mints the faucet amount to the caller; returns the amount."""
        rc = self.transact("IntellectToken", "drip")
        return int(rc.event("FaucetDripped").args["amount"])

    def faucet_info(self, account: str | None = None) -> FaucetInfo:
        a = _addr(account or self.address) if (account or self.account) else "0x" + "00" * 20
        return FaucetInfo(enabled=bool(self.call("IntellectToken", "faucetEnabled")),
                          amount=int(self.call("IntellectToken", "faucetAmount")),
                          cooldown=int(self.call("IntellectToken", "faucetCooldown")),
                          next_drip_at=int(self.call("IntellectToken", "nextDripAt", a)))

    def _ensure_allowance(self, spender_contract: str, amount: int) -> None:
        spender = self.contracts[spender_contract].address
        if self.allowance(self.address, spender) < amount:
            self.approve(spender, amount)

    def transfer_from(self, owner: str, to: str, amount: int) -> Receipt:
        return self.transact("IntellectToken", "transferFrom", _addr(owner), _addr(to), int(amount))

    def token_metadata(self) -> dict[str, Any]:
        """name, symbol, decimals and the EIP-712 domain separator of the token."""
        return {"name": self.call("IntellectToken", "name"), "symbol": self.call("IntellectToken", "symbol"),
                "decimals": int(self.call("IntellectToken", "decimals")),
                "domain_separator": "0x" + bytes(self.call("IntellectToken", "DOMAIN_SEPARATOR")).hex()}

    def permit_nonce(self, owner: str | None = None) -> int:
        return int(self.call("IntellectToken", "nonces", _addr(owner or self.address)))

    def sign_permit(self, spender: str, amount: int, deadline: int) -> tuple[int, bytes, bytes]:
        """EIP-2612 permit signature (v, r, s) by this account for `spender`."""
        if self.account is None:
            raise ConfigError("sign_permit needs an account")
        token = self.contracts["IntellectToken"]
        signed = Account.sign_typed_data(
            self.account.key,
            domain_data={"name": str(self.call("IntellectToken", "name")), "version": "1", "chainId": self.chain_id,
                         "verifyingContract": token.address},
            message_types={"Permit": [{"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                                      {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
                                      {"name": "deadline", "type": "uint256"}]},
            message_data={"owner": self.address, "spender": _addr(spender), "value": int(amount),
                          "nonce": self.permit_nonce(), "deadline": int(deadline)},
        )
        return signed.v, signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big")

    def permit(self, spender: str, amount: int, deadline: int | None = None) -> Receipt:
        """Approve `spender` through the token's `permit` (signed here, sent by this account)."""
        deadline = deadline or self.chain_time() + 3600
        v, r, s_ = self.sign_permit(spender, amount, deadline)
        return self.transact("IntellectToken", "permit", self.address, _addr(spender), int(amount), int(deadline),
                             v, r, s_)

    # -- AccessControl (token, stake manager, ledger) ----------------------------------------------
    @staticmethod
    def role_id(role: str) -> bytes:
        """bytes32 of an AccessControl role name ("DEFAULT_ADMIN_ROLE" is zero)."""
        return b"\x00" * 32 if role == "DEFAULT_ADMIN_ROLE" else bytes(Web3.keccak(text=role))

    def has_role(self, contract: str, role: str, account: str) -> bool:
        return bool(self.call(contract, "hasRole", self.role_id(role), _addr(account)))

    def role_admin(self, contract: str, role: str) -> bytes:
        return bytes(self.call(contract, "getRoleAdmin", self.role_id(role)))

    def grant_role(self, contract: str, role: str, account: str) -> Receipt:
        return self.transact(contract, "grantRole", self.role_id(role), _addr(account))

    def revoke_role(self, contract: str, role: str, account: str) -> Receipt:
        return self.transact(contract, "revokeRole", self.role_id(role), _addr(account))

    def renounce_role(self, contract: str, role: str) -> Receipt:
        return self.transact(contract, "renounceRole", self.role_id(role), self.address)

    def supports_interface(self, contract: str, interface_id: bytes) -> bool:
        return bool(self.call(contract, "supportsInterface", bytes(interface_id)))

    def wiring(self) -> dict[str, str]:
        """The addresses the contracts point at (to check a deployment file against the chain)."""
        return {"TaskLedger.token": str(self.call("TaskLedger", "token")),
                "TaskLedger.registry": str(self.call("TaskLedger", "registry")),
                "TaskLedger.stakeManager": str(self.call("TaskLedger", "stakeManager")),
                "StakeManager.stakeToken": str(self.call("StakeManager", "stakeToken")),
                "StakeManager.registry": str(self.call("StakeManager", "registry"))}

    def registry_limits(self) -> dict[str, Any]:
        """NodeRegistry constants: string limits, the EIP-712 type hash and domain."""
        return {"max_gpu_model_length": int(self.call("NodeRegistry", "MAX_GPU_MODEL_LENGTH")),
                "max_endpoint_length": int(self.call("NodeRegistry", "MAX_ENDPOINT_LENGTH")),
                "register_typehash": "0x" + bytes(self.call("NodeRegistry", "REGISTER_TYPEHASH")).hex(),
                "eip712_domain": _plain(list(self.call("NodeRegistry", "eip712Domain")))}

    # -- NodeRegistry ---------------------------------------------------------------------------
    def registration_digest(self, node: str, owner: str, role: Role | str | int, deadline: int) -> bytes:
        return bytes(self.call("NodeRegistry", "registrationDigest", _addr(node), _addr(owner),
                               int(Role.parse(role)), int(deadline)))

    def registration_nonce(self, node: str) -> int:
        return int(self.call("NodeRegistry", "nonces", _addr(node)))

    def sign_registration(self, node_account: LocalAccount, owner: str, role: Role | str | int,
                          deadline: int) -> bytes:
        """The node key's EIP-712 signature allowing `owner` to register it with `role`."""
        digest = self.registration_digest(node_account.address, owner, role, deadline)
        return bytes(Account.unsafe_sign_hash(digest, node_account.key).signature)

    def register_node(self, role: Role | str | int, *, node_account: LocalAccount | None = None,
                      node_signature: bytes | None = None, node: str | None = None, gpu_model: str = "cpu",
                      vram_gib: int = 0, gpu_count: int = 0, endpoint: str = "",
                      deadline: int | None = None) -> Node:
        """Register a node owned by this account. The node key signs (default: this account is the node)."""
        r = Role.parse(role)
        if deadline is None:
            deadline = self.chain_time() + 3600
        if node_signature is None:
            signer = node_account or self.account
            if signer is None:
                raise ConfigError("register_node needs the node key (node_account) or its signature")
            node = signer.address
            node_signature = self.sign_registration(signer, self.address, r, deadline)
        elif node is None:
            raise ConfigError("register_node with a ready signature needs the node address")
        self.transact("NodeRegistry", "register", _addr(node), int(r), gpu_model, int(vram_gib), int(gpu_count),
                      endpoint, int(deadline), node_signature)
        return self.node(node)

    def update_node(self, node: str, *, gpu_model: str, vram_gib: int, gpu_count: int, endpoint: str) -> Node:
        self.transact("NodeRegistry", "update", _addr(node), gpu_model, int(vram_gib), int(gpu_count), endpoint)
        return self.node(node)

    def exit_node(self, node: str | None = None) -> Receipt:
        return self.transact("NodeRegistry", "exit", _addr(node or self.address))

    def node(self, address: str | None = None) -> Node:
        a = _addr(address or self.address)
        info = self.call("NodeRegistry", "nodeInfo", a)
        return _built("NodeRegistry.nodeInfo", lambda: Node(
            address=a, owner=info[0], role=Role(info[1]), status=NodeStatus(info[2]), vram_gib=info[3],
            gpu_count=info[4], registered_at=info[5], gpu_model=info[6], endpoint=info[7]))

    def node_core(self, address: str) -> tuple[str, Role, NodeStatus]:
        v = self.call("NodeRegistry", "nodeCore", _addr(address))
        return _built("NodeRegistry.nodeCore", lambda: (str(v[0]), Role(v[1]), NodeStatus(v[2])))

    def owner_of(self, node: str) -> str:
        return str(self.call("NodeRegistry", "ownerOf", _addr(node)))

    def is_active(self, node: str, role: Role | str | int) -> bool:
        return bool(self.call("NodeRegistry", "isActive", _addr(node), int(Role.parse(role))))

    def active_count(self, role: Role | str | int) -> int:
        return int(self.call("NodeRegistry", "activeCount", int(Role.parse(role))))

    # -- StakeManager ---------------------------------------------------------------------------
    def stake(self, node: str, amount: int, *, approve: bool = True) -> Stake:
        """Add `amount` to `node`'s active stake (approving the StakeManager first when needed)."""
        if approve:
            self._ensure_allowance("StakeManager", amount)
        self.transact("StakeManager", "stake", _addr(node), int(amount))
        return self.stake_of(node)

    def stake_with_permit(self, node: str, amount: int, *, deadline: int | None = None) -> Stake:
        """Stake in one transaction, approving through an EIP-2612 permit signed here."""
        deadline = deadline or self.chain_time() + 3600
        v, r, s_ = self.sign_permit(self.contracts["StakeManager"].address, amount, deadline)
        self.transact("StakeManager", "stakeWithPermit", _addr(node), int(amount), int(deadline), v, r, s_)
        return self.stake_of(node)

    def request_unstake(self, node: str, amount: int) -> Stake:
        self.transact("StakeManager", "requestUnstake", _addr(node), int(amount))
        return self.stake_of(node)

    def withdraw(self, node: str) -> int:
        """Withdraw the released unbonding stake to the owner; returns the amount."""
        rc = self.transact("StakeManager", "withdraw", _addr(node))
        return int(rc.event("Withdrawn").args["amount"])

    def stake_of(self, node: str | None = None) -> Stake:
        a = _addr(node or self.address)
        s = self.call("StakeManager", "stakeOf", a)
        _, role, _ = self.node_core(a)
        min_stake = self.min_stake(role) if role != Role.NONE else None
        return _built("StakeManager.stakeOf", lambda: Stake(node=a, active=s[0], unbonding=s[1], release_at=s[2],
                                                            open_challenges=s[3], min_stake=min_stake))

    def active_stake(self, node: str) -> int:
        return int(self.call("StakeManager", "activeStake", _addr(node)))

    def has_min_stake(self, node: str, role: Role | str | int) -> bool:
        return bool(self.call("StakeManager", "hasMinStake", _addr(node), int(Role.parse(role))))

    def min_stake(self, role: Role | str | int) -> int:
        return int(self.call("StakeManager", "minStake", int(Role.parse(role))))

    def validator_weight_at(self, node: str, block: int) -> int:
        """`node`'s validator weight (active stake while an active validator, else 0) at the end of past block
        `block`: checkpointed on-chain, so any node answers it (no archive state needed)."""
        return int(self.call("StakeManager", "validatorWeightAt", _addr(node), int(block)))

    def unbonding_period(self) -> int:
        return int(self.call("StakeManager", "unbondingPeriod"))

    def unbonding_floor(self) -> int:
        return int(self.call("StakeManager", "unbondingFloor"))

    def challenger_share_bps(self) -> int:
        return int(self.call("StakeManager", "challengerShareBps"))

    def treasury(self) -> str:
        return str(self.call("StakeManager", "treasury"))

    def total_staked(self) -> int:
        return int(self.call("StakeManager", "totalStaked"))

    def set_min_stake(self, role: Role | str | int, amount: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setMinStake", int(Role.parse(role)), int(amount))

    def set_unbonding_period(self, period: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setUnbondingPeriod", int(period))

    def set_challenger_share_bps(self, bps: int) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setChallengerShareBps", int(bps))

    def set_treasury(self, treasury: str) -> Receipt:
        """Admin only."""
        return self.transact("StakeManager", "setTreasury", _addr(treasury))

    # -- TaskLedger: pools and checkpoints --------------------------------------------------------
    def create_pool(self, params: PoolParams) -> int:
        rc = self.transact("TaskLedger", "createPool", params.as_tuple())
        return int(rc.event("PoolCreated").args["poolId"])

    def fund_pool(self, pool_id: int, amount: int, *, approve: bool = True) -> Pool:
        if approve:
            self._ensure_allowance("TaskLedger", amount)
        self.transact("TaskLedger", "fundPool", int(pool_id), int(amount))
        return self.pool(pool_id)

    def announce_defund(self, pool_id: int, amount: int) -> int:
        """Pool owner: announce taking back up to `amount` of budget; returns the chain time from which
        `defund_pool` may take it (one lease duration later: every lease open now has ended by then)."""
        rc = self.transact("TaskLedger", "announceDefund", int(pool_id), int(amount))
        return int(rc.event("PoolDefundAnnounced").args["executableAt"])

    def defund_pool(self, pool_id: int, amount: int, to: str | None = None) -> Pool:
        """Pool owner: take `amount` of unreserved budget, at most what `announce_defund` announced at least
        one lease duration ago (TaskLedgerDefundNotAnnounced otherwise)."""
        self.transact("TaskLedger", "defundPool", int(pool_id), int(amount), _addr(to or self.address))
        return self.pool(pool_id)

    def publish_checkpoint(self, pool_id: int, step: int, manifest_cid: str) -> Checkpoint:
        rc = self.transact("TaskLedger", "publishCheckpoint", int(pool_id), int(step), manifest_cid)
        return Checkpoint(pool_id=pool_id, step=step, manifest_cid=manifest_cid, block_number=rc.block_number,
                          tx_hash=rc.tx_hash)

    def pool(self, pool_id: int) -> Pool:
        v = self.call("TaskLedger", "pool", int(pool_id))
        return _built("TaskLedger.pool", lambda: Pool(
            pool_id=pool_id, owner=v[0], params=PoolParams.from_tuple(v[1]), budget=v[2], reserved=v[3],
            has_checkpoint=v[4], latest_step=v[5] if v[4] else None))

    def pool_state(self, pool_id: int) -> PoolStatus:
        """The pool's state (open, paused, finished, or stalled: its trainer's heartbeat lapsed) and until when it
        takes claims (issue 37)."""
        state, open_until = self.call("TaskLedger", "poolState", int(pool_id))
        return PoolStatus(pool_id=int(pool_id), state=PoolState(int(state)), open_until=int(open_until))

    def set_pool_state(self, pool_id: int, state: PoolState | str) -> Receipt:
        """Pause or resume (pool owner), or finish (owner or trainer; anyone once the trainer's heartbeat lapsed:
        the unreserved budget goes back to the owner) a pool; the trainer's `open` is its heartbeat."""
        st = state if isinstance(state, PoolState) else PoolState[str(state).upper()]
        return self.transact("TaskLedger", "setPoolState", int(pool_id), int(st))

    def heartbeat(self, pool_id: int) -> Receipt:
        """The pool trainer's heartbeat: its open pool takes claims for another lease duration (as a checkpoint
        publish does)."""
        return self.set_pool_state(pool_id, PoolState.OPEN)

    def pool_count(self) -> int:
        return int(self.call("TaskLedger", "poolCount"))

    def pools(self) -> list[Pool]:
        return [self.pool(i) for i in range(1, self.pool_count() + 1)]

    def checkpoint(self, pool_id: int, step: int) -> Checkpoint:
        cid = self.call("TaskLedger", "checkpoint", int(pool_id), int(step))
        return Checkpoint(pool_id=pool_id, step=step, manifest_cid=str(cid))

    def latest_step(self, pool_id: int) -> int | None:
        """The latest published step, None when the pool has none yet."""
        try:
            return int(self.call("TaskLedger", "latestStep", int(pool_id)))
        except ContractRevert as exc:
            if exc.name == "TaskLedgerNoCheckpoint":
                return None
            raise

    def latest_checkpoint(self, pool_id: int) -> Checkpoint | None:
        step = self.latest_step(pool_id)
        return None if step is None else self.checkpoint(pool_id, step)

    def checkpoints(self, pool_id: int, *, from_block: int | None = None) -> list[Checkpoint]:
        """Every CheckpointPublished of the pool, oldest first (from the event log)."""
        return [Checkpoint(pool_id=e.args["poolId"], step=e.args["step"], manifest_cid=e.args["manifestCid"],
                           block_number=e.block_number, tx_hash=e.tx_hash)
                for e in self.get_events(["CheckpointPublished"], from_block=from_block,
                                         filters={"poolId": int(pool_id)})]

    def set_min_window_length(self, seconds: int) -> Receipt:
        """Admin only."""
        return self.transact("TaskLedger", "setMinWindowLength", int(seconds))

    def min_window_length(self) -> int:
        return int(self.call("TaskLedger", "minWindowLength"))

    def pool_bounds(self) -> tuple[int, int]:
        """(minChallengeBond, minQuorum): the ledger's floors on new pools."""
        v = self.call("TaskLedger", "poolBounds")
        return int(v[0]), int(v[1])

    def reservation_leverage(self) -> int:
        """Tokens of reservations a node may hold in a pool per token of its active stake (0: no bound)."""
        return int(self.call("TaskLedger", "poolBounds")[2])

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

    # -- AttesterBook: validators paid per used attestation, slashed for attesting upheld work ------------
    def _book(self) -> str:
        if "AttesterBook" not in self.contracts:
            raise ConfigError(f"deployment for chain {self.chain_id} has no AttesterBook address "
                              "(deployed by scripts/deploy.py since issue 21): redeploy or add it to the file")
        return "AttesterBook"

    def set_attester_reward(self, pool_id: int, reward_per_attestation: int) -> AttesterPoolRule:
        """Fix, once, the pool's reward per recorded attestation. Only the pool's owner."""
        self.transact(self._book(), "setAttesterReward", int(pool_id), int(reward_per_attestation))
        return self.attester_pool_rule(pool_id)

    def fund_attester_rewards(self, pool_id: int, amount: int, *, approve: bool = True) -> AttesterPoolRule:
        """Escrow `amount` for the pool's attester rewards (anyone)."""
        if approve:
            self._ensure_allowance(self._book(), amount)
        self.transact(self._book(), "fundAttesterRewards", int(pool_id), int(amount))
        return self.attester_pool_rule(pool_id)

    def attester_pool_rule(self, pool_id: int) -> AttesterPoolRule:
        reward, budget = self.call(self._book(), "poolRule", int(pool_id))
        return AttesterPoolRule(pool_id=pool_id, reward_per_attestation=reward, budget=budget)

    def record_attestations(self, submission_id: int, validators: Sequence[str]) -> list[AttesterRecord]:
        """The trainer records the validators whose attestations of `submission_id` it used (inside the
        window; at most 16 per call; each once); reserves one reward each. Returns the records made."""
        rc = self.transact(self._book(), "recordAttestations", int(submission_id), [_addr(v) for v in validators])
        return [AttesterRecord(submission_id=e.args["submissionId"], validator=e.args["validator"],
                               reward=e.args["reward"], reserved=e.args["reward"], block_number=rc.block_number)
                for e in rc.events if e.event == "AttestationRecorded"]

    def attestation_reserved(self, submission_id: int, validator: str) -> int:
        """The reward reserved for `validator`'s recorded attestation of `submission_id` (0: none or settled)."""
        return int(self.call(self._book(), "recorded", int(submission_id), _addr(validator)))

    def attester_records(self, validator: str | None = None, *, from_block: int | None = None,
                         unsettled_only: bool = True) -> list[AttesterRecord]:
        """The attestations of `validator` (default: this account) that trainers recorded, from the event
        log, with what each still reserves; by default only those not yet paid, released or slashed."""
        v = _addr(validator or self.address)
        out = []
        for e in self.get_events(["AttestationRecorded"], from_block=from_block, filters={"validator": v}):
            sid = int(e.args["submissionId"])
            reserved = self.attestation_reserved(sid, v)
            if reserved or not unsettled_only:
                out.append(AttesterRecord(submission_id=sid, validator=v, reward=e.args["reward"],
                                          reserved=reserved, block_number=e.block_number))
        return out

    def claim_attester_reward(self, submission_id: int, validator: str | None = None) -> int:
        """Pay a recorded attestation's reward to the validator's owner (anyone may send it) once the
        submission is final and payable; returns the amount paid."""
        rc = self.transact(self._book(), "claimAttesterReward", int(submission_id), _addr(validator or self.address))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardPaid")

    def release_attester_reward(self, submission_id: int, validator: str) -> int:
        """Return the reward of an attestation of upheld or voided work to its pool (anyone)."""
        rc = self.transact(self._book(), "releaseAttesterReward", int(submission_id), _addr(validator))
        return sum(int(e.args["amount"]) for e in rc.events if e.event == "AttesterRewardReleased")

    def claim_attester_rewards(self, validator: str | None = None, *, from_block: int | None = None,
                               cursor_path: Path | str | None = None) -> int:
        """Claim every recorded attestation reward of `validator` (default: this account) that is payable now;
        returns the total paid.

        Incremental: the first call scans AttestationRecorded from `from_block` (default the deployment block);
        later calls on this `Protocol` scan only the blocks after the last one scanned and ask only about the
        records not yet settled: a record costs one read of its window's end when first seen, nothing while that
        window is open, then one eth_call of `claimAttesterReward` per pass until it is paid or found settled
        (by anyone: paid, released, slashed) or never payable (its work upheld or voided). With `cursor_path`
        that state (`AttesterClaimCursor`: the last block scanned and the unsettled records) is kept in a JSON
        file, replaced atomically, so a restarted program resumes instead of rescanning from the deployment."""
        v = _addr(validator or self.address)
        cur = self._attester_cursor(v, from_block, cursor_path)
        head = self.block_number()
        if head > cur.scanned_to:
            for e in self.get_events(["AttestationRecorded"], from_block=cur.scanned_to + 1, to_block=head,
                                     filters={"validator": v}):
                cur.pending.setdefault(int(e.args["submissionId"]), -1)  # window end not read yet
            cur.scanned_to = head
        now, total = None, 0
        for sid in sorted(cur.pending):
            if cur.pending[sid] < 0:
                cur.pending[sid] = int(self.task(sid).window_end)
            now = self.chain_time() if now is None else now
            if cur.pending[sid] > now:
                continue  # window open: nothing to ask
            try:
                self.call(self._book(), "claimAttesterReward", sid, v)
            except ContractRevert as exc:
                if exc.name == "AttesterBookBadRecord" or self.task(sid).status in (TaskStatus.UPHELD,
                                                                                    TaskStatus.VOIDED):
                    del cur.pending[sid]  # settled by someone, or released to the pool instead
                continue  # else not payable yet (challenged): asked again next call
            total += self.claim_attester_reward(sid, v)
            del cur.pending[sid]
        if cursor_path is not None:
            write_atomic(Path(cursor_path), cur.model_dump_json())
        return total

    def _attester_cursor(self, validator: str, from_block: int | None,
                         cursor_path: Path | str | None) -> AttesterClaimCursor:
        cursors = self._attester_cursors
        cur = cursors.get(validator)
        if cur is None and cursor_path is not None and Path(cursor_path).is_file():
            try:
                cur = AttesterClaimCursor.model_validate_json(Path(cursor_path).read_text())
            except ValueError as exc:
                raise ConfigError(f"attester cursor {cursor_path} is invalid ({exc}); delete it to rescan") from None
            if cur.chain_id != self.chain_id or cur.validator != validator:
                raise ConfigError(f"attester cursor {cursor_path} is for validator {cur.validator} on chain "
                                  f"{cur.chain_id}, not {validator} on chain {self.chain_id}")
        if cur is None:
            start = int(self.deployment.block if from_block is None else from_block)
            cur = AttesterClaimCursor(chain_id=self.chain_id, validator=validator, scanned_to=start - 1)
        cursors[validator] = cur
        return cur

    def slash_attester(self, submission_id: int, validator: str, *, rollouts_cid: str, proofs_hash: bytes | str,
                       policy_step: int, signature: bytes | str) -> int:
        """Slash `validator` for its accepting EIP-712 attestation (`signature` over the submission's rollouts
        CID, proofs hash and policy step) of `submission_id`, which the ledger upheld as bad (anyone; the
        sender gets the challenger's share). Returns the amount slashed."""
        ph, sig = _hex_bytes(proofs_hash), _hex_bytes(signature)
        if len(ph) != 32:
            raise ValueError(f"proofs_hash must be 32 bytes, got {len(ph)}")
        rc = self.transact(self._book(), "slashAttester", int(submission_id), _addr(validator),
                           bytes(Web3.keccak(text=rollouts_cid)), ph, int(policy_step), sig)
        return sum(int(e.args["slashed"]) for e in rc.events if e.event == "AttesterSlashed")

    def slash_voter(self, challenge_id: int, validator: str) -> int:
        """Slash `validator` for voting against the outcome of the challenge's latest resolved round (anyone;
        the sender gets the challenger's share). Returns the amount slashed."""
        rc = self.transact(self._book(), "slashVoter", int(challenge_id), _addr(validator))
        return sum(int(e.args["slashed"]) for e in rc.events if e.event == "VoterSlashed")

    def attester_slash(self) -> int:
        return int(self.call(self._book(), "attesterSlash"))

    def voter_slash(self) -> int:
        return int(self.call(self._book(), "voterSlash"))

    def set_attester_slash(self, amount: int) -> Receipt:
        """Admin only."""
        return self.transact(self._book(), "setAttesterSlash", int(amount))

    def set_voter_slash(self, amount: int) -> Receipt:
        """Admin only."""
        return self.transact(self._book(), "setVoterSlash", int(amount))

    def attestation_digest(self, submission_id: int, rollouts_cid: str, proofs_hash: bytes | str, policy_step: int,
                           accepted: bool = True) -> bytes:
        """The EIP-712 digest a validator signs to attest a submission (as the AttesterBook checks it)."""
        return bytes(self.call(self._book(), "attestationDigest", int(submission_id),
                               bytes(Web3.keccak(text=rollouts_cid)), _hex_bytes(proofs_hash), int(policy_step),
                               bool(accepted)))


def _abi_type(inp: dict[str, Any]) -> str:
    t = str(inp["type"])
    if t.startswith("tuple"):
        return "(" + ",".join(_abi_type(c) for c in inp.get("components", [])) + ")" + t[len("tuple"):]
    return t


def _static_type(t: str) -> bool:
    return t in ("address", "bool", "bytes32") or t.startswith(("uint", "int"))


def _plain(v: Any) -> Any:
    """web3 AttributeDicts/HexBytes -> dicts/hex strings (JSON-friendly, comparable)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, bytes):
        return v.hex()
    return v


# What web3 and the libraries under it raise on an answer they cannot read: Web3Exception (BadResponseFormat,
# BadFunctionCallOutput, ...), eth_abi's DecodingError, and plain ValueError (UnicodeDecodeError, JSONDecodeError),
# TypeError/KeyError/IndexError/AttributeError (a wrong shape), OverflowError, RecursionError (deep nesting).
_ANSWER_FAILURES = (Web3Exception, DecodingError, ValueError, TypeError, KeyError, IndexError, AttributeError,
                    OverflowError, RecursionError)


def _built(what: str, build: Callable[[], T]) -> T:
    """A model made of a view's decoded return value; RpcError when the node's values do not fit it (an enum
    value no contract of ours returns, a field out of range)."""
    try:
        return build()
    except (ValueError, TypeError, IndexError, KeyError) as exc:  # ValueError covers pydantic's ValidationError
        raise RpcError(f"{what}: the RPC node returned values no deployed contract returns: {exc}") from None


def _hex_bytes(v: bytes | str) -> bytes:
    """Bytes given as bytes or as hex (with or without 0x)."""
    return bytes.fromhex(v.removeprefix("0x")) if isinstance(v, str) else bytes(v)


def _field(lg: Any, key: str) -> Any:
    """A log field for an error message, whatever the log is."""
    try:
        return lg.get(key)
    except (AttributeError, TypeError):
        return None


def _norm(v: Any) -> Any:
    if isinstance(v, str) and v.startswith("0x") and len(v) == 42:
        return v.lower()
    return v
