"""intellect.sdk: the Python SDK of intellect-protocol (contracts client, events, IPFS, CLI).

Heavy parts (web3) load on first use, so `import intellect.sdk.ipfs` stays light. The SDK never
imports torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from ._errors import (
    CidMismatchError,
    ConfigError,
    ContentNotFoundError,
    ContentTooLargeError,
    ContractRevert,
    IntellectError,
    InvalidCidError,
    IpfsError,
    RpcError,
    SchemaVersionError,
    TransactionTimeout,
    TransientRpcError,
)

# name -> module that defines it (imported lazily on first attribute access)
_LAZY: dict[str, str] = {}

__all__ = [
    "CidMismatchError",
    "ConfigError",
    "ContentNotFoundError",
    "ContentTooLargeError",
    "ContractRevert",
    "IntellectError",
    "InvalidCidError",
    "IpfsError",
    "RpcError",
    "SchemaVersionError",
    "TransactionTimeout",
    "TransientRpcError",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'intellect.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
