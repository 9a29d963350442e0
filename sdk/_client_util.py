"""Helpers of the SDK's contract client (`Protocol` and its parts, `sdk/_client*.py`): addresses, ABI types,
decoded values and the errors of an answer the client cannot read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from eth_abi.exceptions import DecodingError
from web3 import Web3
from web3.exceptions import Web3Exception

from ._errors import ConfigError, RpcError

__all__: list[str] = []

T = TypeVar("T")


def _addr(a: str) -> str:
    try:
        return str(Web3.to_checksum_address(a))
    except (ValueError, TypeError):
        raise ConfigError(f"not an address: {a!r} (expected 0x followed by 40 hex digits)") from None


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
