"""The transport under the client: RPC with retries, revert decoding, nonces, fees, receipts.

- Transient RPC failures (connection refused/reset, timeouts, HTTP 429 and 5xx) are retried with
  exponential backoff; reverts are never retried.
- Reverts become `ContractRevert(name, args)` decoded from the revert data with every contract's
  custom errors (and `Error(string)` / `Panic(uint256)`).
- One `Transactor` per account: a lock hands out nonces in order, so one process may send many
  transactions from many threads; a "nonce too low" answer resynchronises with the node.
- EIP-1559 fees: maxFee = 2 x base fee + tip, capped by `max_fee_per_gas` (ConfigError if the
  base fee alone is above the cap: the transaction would never be mined).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import requests
from eth_abi import decode as abi_decode
from eth_account.signers.local import LocalAccount
from eth_utils import function_signature_to_4byte_selector
from web3 import Web3
from web3.exceptions import ContractLogicError, TimeExhausted, TransactionNotFound, Web3RPCError

from ._errors import ContractRevert, RpcError, TransactionTimeout, TransientRpcError

__all__ = ["ErrorDecoder", "RetryPolicy", "Transactor", "http_error", "redact_url", "with_retries"]

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_TRACKED_TXS = 256  # signed transactions kept for a resend while their receipt is awaited
_TRANSIENT_HTTP = {408, 425, 429, 500, 502, 503, 504}
_TRANSIENT_TEXT = ("connection refused", "connection reset", "timed out", "timeout", "temporarily unavailable",
                   "too many requests", "rate limit", "header not found", "econnrefused", "bad gateway")


class RetryPolicy:
    """Exponential backoff with jitter: `attempts` tries, delays base*2^k capped at `max_delay`."""

    def __init__(self, attempts: int = 6, base_delay: float = 0.25, max_delay: float = 8.0) -> None:
        self.attempts = attempts
        self.base_delay = base_delay
        self.max_delay = max_delay

    def delay(self, attempt: int) -> float:
        d = min(self.max_delay, self.base_delay * (2**attempt))
        return d * (0.5 + random.random() / 2)


def is_transient(exc: BaseException) -> bool:
    """Whether an exception from web3/requests is worth retrying (never a revert)."""
    if isinstance(exc, ContractLogicError | ContractRevert):
        return False
    if isinstance(exc, requests.ConnectionError | requests.Timeout | ConnectionError | TimeoutError):
        return True
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        return exc.response.status_code in _TRANSIENT_HTTP
    if isinstance(exc, Web3RPCError):
        text = str(exc).lower()
        return any(t in text for t in _TRANSIENT_TEXT)
    return False


def with_retries(fn: Callable[[], T], policy: RetryPolicy, what: str) -> T:
    """Run `fn`, retrying transient failures; TransientRpcError when the attempts run out."""
    for attempt in range(policy.attempts):
        try:
            return fn()
        except Exception as exc:
            if not is_transient(exc):
                if isinstance(exc, requests.HTTPError):
                    raise http_error(exc, what) from None
                raise
            if attempt == policy.attempts - 1:
                raise TransientRpcError(
                    f"{what}: the RPC node kept failing ({_describe(exc)}) after "
                    f"{policy.attempts} attempts; check the node / --rpc-url and retry"
                ) from exc
            delay = policy.delay(attempt)
            log.warning("%s: transient RPC error (%s), retry %d in %.2f s", what, exc.__class__.__name__,
                        attempt + 1, delay)
            time.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def redact_url(url: str) -> str:
    """An RPC URL fit for a log line or an error: scheme, host and port; a path or query (where providers put the
    API key) becomes `/…`, credentials are dropped."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "<unreadable URL>"
    rest = "/…" if (parts.path not in ("", "/") or parts.query) else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{rest}"


def _describe(exc: BaseException) -> str:
    """A failure in a few words; an HTTP error by its status only (its text holds the URL, and a provider's URL
    often holds the API key)."""
    if isinstance(exc, requests.HTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return f"HTTP {status}"
    if isinstance(exc, requests.RequestException):  # its text repeats the URL's path ("Max retries ... url: /v2/KEY")
        text = str(exc).lower()
        why = next((t for t in ("connection refused", "timed out", "no route to host", "connection reset",
                                "name or service not known", "network is unreachable") if t in text), "")
        return exc.__class__.__name__ + (f": {why}" if why else "")
    return f"{exc.__class__.__name__}: {str(exc)[:160]}"


_HTTP_HINTS = {
    401: "the provider refused the credentials: check the API key in the RPC URL",
    403: "the provider refused access: check the API key, its allowed origins/IPs, or the plan",
    404: "nothing answers JSON-RPC at that path: check the RPC URL",
}


def http_error(exc: requests.HTTPError, what: str) -> RpcError:
    """One RpcError line for an RPC node's HTTP error answer (401/403/404/...): status, URL without its
    query or credentials, and what to check. (HTTP 408/425/429/5xx are retried first: `is_transient`.)"""
    status = exc.response.status_code if exc.response is not None else 0
    reason = (exc.response.reason if exc.response is not None else "") or ""
    url = f" from {redact_url(exc.response.url)}" if exc.response is not None and exc.response.url else ""
    hint = _HTTP_HINTS.get(status, "check --rpc-url and the provider's status")
    return RpcError(f"{what}: the RPC node answered HTTP {status} {reason}{url}; {hint}".replace("  ", " "))


class ErrorDecoder:
    """selector -> (error name, arg names, arg types) from ABIs."""

    def __init__(self, abis: Iterable[list[dict[str, Any]]]) -> None:
        self._errors: dict[bytes, tuple[str, list[str], list[str]]] = {
            bytes.fromhex("08c379a0"): ("Error", ["message"], ["string"]),
            bytes.fromhex("4e487b71"): ("Panic", ["code"], ["uint256"]),
        }
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = [_abi_type(i) for i in item.get("inputs", [])]
                names = [i.get("name") or f"arg{n}" for n, i in enumerate(item.get("inputs", []))]
                sel = function_signature_to_4byte_selector(f"{item['name']}({','.join(types)})")
                self._errors[sel] = (item["name"], names, types)

    def decode(self, data: str | bytes | None, *, function: str = "", contract: str = "",
               message: str = "") -> ContractRevert:
        raw = _to_bytes(data)
        if raw is None or len(raw) < 4:
            reason = message.replace("execution reverted", "").strip(": ") or "no reason"
            return ContractRevert("unknown", {"reason": reason}, function=function, contract=contract,
                                  raw=(raw or b"").hex())
        entry = self._errors.get(raw[:4])
        if entry is None:
            return ContractRevert("unknown", {"selector": "0x" + raw[:4].hex()}, function=function,
                                  contract=contract, raw=raw.hex())
        name, names, types = entry
        try:
            values = abi_decode(types, raw[4:])
        except Exception:  # malformed revert data: keep the name, say the args were unreadable
            return ContractRevert(name, {"undecodable": "0x" + raw[4:].hex()}, function=function,
                                  contract=contract, raw=raw.hex())
        args = {n: _plain_arg(t, v) for n, t, v in zip(names, types, values, strict=True)}
        return ContractRevert(name, args, function=function, contract=contract, raw=raw.hex())

    def from_exception(self, exc: ContractLogicError, *, function: str = "", contract: str = "") -> ContractRevert:
        data = exc.data if isinstance(exc.data, str | bytes) else None
        if isinstance(data, str) and not data.startswith("0x"):
            data = None
        return self.decode(data, function=function, contract=contract, message=str(exc.message or exc))


def _plain_arg(abi_type: str, value: Any) -> Any:
    if abi_type == "address":
        return Web3.to_checksum_address(value)
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return value


def _abi_type(inp: dict[str, Any]) -> str:
    t = str(inp["type"])
    if t.startswith("tuple"):
        return "(" + ",".join(_abi_type(c) for c in inp.get("components", [])) + ")" + t[len("tuple"):]
    return t


def _to_bytes(data: str | bytes | None) -> bytes | None:
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    if not isinstance(data, str):  # None, or whatever a broken node put in the error's data
        return None
    try:
        return bytes.fromhex(data[2:] if data.startswith("0x") else data)
    except ValueError:
        return None


class Transactor:
    """Signs and sends transactions for one account: ordered nonces, capped EIP-1559 fees, receipts."""

    def __init__(self, w3: Web3, account: LocalAccount, decoder: ErrorDecoder, *, chain_id: int,
                 retry: RetryPolicy, max_fee_per_gas: int | None = None, max_priority_fee: int = 2 * 10**9,
                 receipt_timeout: float = 120.0, gas_margin: float = 1.25) -> None:
        self.w3 = w3
        self.account = account
        self.decoder = decoder
        self.chain_id = chain_id
        self.retry = retry
        self.max_fee_per_gas = max_fee_per_gas
        self.max_priority_fee = max_priority_fee
        self.receipt_timeout = receipt_timeout
        self.gas_margin = gas_margin
        self._lock = threading.Lock()
        self._next_nonce: int | None = None
        # signed bytes of the transactions still waited for, by hash: one the RPC node forgets (a restart, a
        # mempool eviction) is sent again as is (same nonce, same hash: it can be mined once at most)
        self._signed: OrderedDict[str, bytes] = OrderedDict()
        self.rebroadcast_after = 5.0  # seconds without a receipt before asking whether the node still knows it
        self._fee_cache: tuple[float, dict[str, int]] | None = None
        self.fee_cache_seconds = 2.0  # one L2 block: fees are re-read at most this often

    @property
    def address(self) -> str:
        return str(self.account.address)

    def _fees(self) -> dict[str, int]:
        now = time.monotonic()
        if self._fee_cache is not None and now - self._fee_cache[0] < self.fee_cache_seconds:
            return dict(self._fee_cache[1])
        fees = self._read_fees()
        self._fee_cache = (now, fees)
        return dict(fees)

    def _read_fees(self) -> dict[str, int]:
        block = with_retries(lambda: self.w3.eth.get_block("latest"), self.retry, "get_block")
        try:
            base = int(block.get("baseFeePerGas", 0) or 0)
        except (AttributeError, TypeError, ValueError) as exc:
            raise RpcError(f"the RPC node's latest block has no readable base fee: {exc}") from None
        tip = self.max_priority_fee
        with contextlib.suppress(Web3RPCError, ValueError, TypeError):
            tip = min(int(with_retries(lambda: self.w3.eth.max_priority_fee, self.retry, "max_priority_fee")), tip)
        max_fee = 2 * base + tip
        if self.max_fee_per_gas is not None:
            if base > self.max_fee_per_gas:
                raise RpcError(
                    f"base fee {base} wei/gas is above the cap {self.max_fee_per_gas}: the transaction would not "
                    "be mined; wait for lower fees or raise --max-fee-gwei"
                )
            max_fee = min(max_fee, self.max_fee_per_gas)
            tip = min(tip, max_fee)
        return {"maxFeePerGas": max_fee, "maxPriorityFeePerGas": tip}

    def _sync_nonce(self) -> int:
        return int(with_retries(lambda: self.w3.eth.get_transaction_count(self.account.address, "pending"),
                                self.retry, "get_transaction_count"))

    def send(self, fn: Any, *, contract: str, function: str, value: int = 0, gas: int | None = None) -> str:
        """Estimate (reverts surface here, decoded), sign with the next nonce, send; returns the tx hash."""
        tx: dict[str, Any] = {"from": self.account.address, "value": value, "chainId": self.chain_id}
        if gas is None:
            try:
                est = with_retries(lambda: fn.estimate_gas(tx, block_identifier="pending"), self.retry,
                                   f"{contract}.{function} estimate")
            except ContractLogicError as exc:
                raise self.decoder.from_exception(exc, function=function, contract=contract) from None
            gas = int(est * self.gas_margin) + 10_000
        tx["gas"] = gas
        tx.update(self._fees())
        with self._lock:
            for attempt in range(3):
                if self._next_nonce is None:
                    self._next_nonce = self._sync_nonce()
                tx["nonce"] = self._next_nonce
                built = fn.build_transaction(tx)
                signed = self.account.sign_transaction(built)
                raw = signed.raw_transaction
                try:
                    h = with_retries(lambda raw=raw: self.w3.eth.send_raw_transaction(raw), self.retry,
                                     f"{contract}.{function} send")
                except Web3RPCError as exc:
                    text = str(exc).lower()
                    if "already known" in text:
                        h = signed.hash
                    elif any(t in text for t in ("nonce too low", "nonce too high", "invalid nonce",
                                                 "replacement transaction underpriced")):
                        log.info("nonce %s refused (%s): resyncing", tx["nonce"], text[:80])
                        self._next_nonce = None
                        if attempt == 2:
                            raise RpcError(f"{contract}.{function}: nonce kept being refused: {exc}") from None
                        continue
                    else:
                        raise RpcError(f"{contract}.{function}: the node refused the transaction: {exc}") from None
                self._next_nonce = tx["nonce"] + 1
                tx_hash = "0x" + bytes(h).hex()
                self._signed[tx_hash] = bytes(raw)
                while len(self._signed) > MAX_TRACKED_TXS:  # sent without waiting, never asked about again
                    self._signed.popitem(last=False)
                return tx_hash
        raise AssertionError("unreachable")  # pragma: no cover

    def _resend_if_dropped(self, tx_hash: str) -> None:
        """Send `tx_hash` again when the RPC node no longer knows it (it restarted without its mempool, or evicted
        it). Without this, a dropped transaction leaves a nonce gap that holds every later one of this account."""
        raw = self._signed.get(tx_hash)
        if raw is None:
            return
        try:
            known = with_retries(lambda: self.w3.eth.get_transaction(tx_hash), self.retry, "get_transaction")
        except TransactionNotFound:
            known = None
        if known is not None:  # pending or mined: the receipt comes, unless a nonce gap holds it
            if known.get("blockNumber") is None:
                self._fill_nonce_gap(tx_hash, int(known["nonce"]))
            return
        try:
            with_retries(lambda: self.w3.eth.send_raw_transaction(raw), self.retry, "send_raw_transaction")
        except Web3RPCError as exc:
            text = str(exc).lower()
            if "already known" in text:
                return
            if "nonce too low" in text or "invalid nonce" in text:
                # mined meanwhile (its receipt comes next), or its nonce taken by another transaction of this
                # key (another process signs with it): then it is never mined, and the wait runs out
                log.warning("transaction %s: the RPC node lost it and refuses it again (%s)", tx_hash, text[:80])
                self._signed.pop(tx_hash, None)
                return
            raise RpcError(f"transaction {tx_hash}: the RPC node lost it and refused it again: {exc}") from None
        log.warning("transaction %s: the RPC node no longer knew it (restarted or dropped it): sent it again",
                    tx_hash)

    def _fill_nonce_gap(self, tx_hash: str, nonce: int) -> None:
        """Fill the nonces below `nonce` that the chain lacks with empty transfers to self, so that `tx_hash` (pending
        at `nonce`) is mined. A gap opens when the chain loses blocks that held this account's transactions (an RPC
        node restarted from an older state dump, a reorg) while this process keeps counting from its own last nonce:
        without this, every transaction waits out the receipt timeout, and the stuck one runs whenever the account's
        nonce next reaches it. Sending it again at a lower nonce instead would run the same call twice."""
        have = self._sync_nonce()
        if nonce <= have:
            return  # the next one to mine: no gap
        log.warning("transaction %s waits at nonce %d but the chain's next nonce of %s is %d (the chain lost blocks: "
                    "an RPC node restarted from an older state, a reorg): filling %d nonce(s) with empty transfers",
                    tx_hash, nonce, self.account.address, have, nonce - have)
        fees = self._fees()
        with self._lock:
            for n in range(have, nonce):
                filler = {"to": self.account.address, "value": 0, "gas": 21_000, "nonce": n,
                          "chainId": self.chain_id, **fees}
                raw = self.account.sign_transaction(filler).raw_transaction
                try:
                    with_retries(lambda raw=raw: self.w3.eth.send_raw_transaction(raw), self.retry,
                                 "send_raw_transaction")
                except Web3RPCError as exc:
                    text = str(exc).lower()
                    if not any(t in text for t in ("already known", "nonce too low", "invalid nonce",
                                                   "replacement transaction underpriced")):
                        raise RpcError(f"filling nonce {n} of {self.account.address}: {exc}") from None
                    # taken meanwhile (this key's other sender, a transaction mined): nothing to fill

    def wait(self, tx_hash: str, *, fn_for_replay: Any = None, contract: str = "", function: str = "",
             timeout: float | None = None) -> Any:
        """Wait for the receipt; a reverted one is replayed with eth_call to recover the custom error."""
        timeout = self.receipt_timeout if timeout is None else timeout
        start = time.monotonic()
        deadline, next_check = start + timeout, start + self.rebroadcast_after
        receipt = None
        delay = 0.05
        while time.monotonic() < deadline:
            try:
                receipt = with_retries(lambda: self.w3.eth.get_transaction_receipt(tx_hash), self.retry,
                                       "get_transaction_receipt")
                break
            except (TransactionNotFound, TimeExhausted):
                if time.monotonic() >= next_check:
                    self._resend_if_dropped(tx_hash)
                    next_check = time.monotonic() + self.rebroadcast_after
                time.sleep(delay)
                delay = min(delay * 1.5, 2.0)
        if receipt is None:
            with self._lock:  # a later send reads the nonce from the node again (this one may be a gap)
                self._next_nonce = None
            raise TransactionTimeout(tx_hash, timeout)
        self._signed.pop(tx_hash, None)
        try:
            status, block_number = receipt["status"], receipt["blockNumber"]
        except (KeyError, TypeError, IndexError) as exc:
            raise RpcError(f"receipt of {tx_hash} from the RPC node is malformed: {exc!r}") from None
        if status != 1:
            if fn_for_replay is not None:
                try:
                    fn_for_replay.call({"from": self.account.address}, block_identifier=block_number)
                except ContractLogicError as exc:
                    raise self.decoder.from_exception(exc, function=function, contract=contract) from None
            raise ContractRevert("unknown", {"tx": tx_hash}, function=function, contract=contract)
        return receipt
