"""The SDK's exception tree. Every error the SDK raises on purpose is an `IntellectError`.

    IntellectError
    ├── ConfigError                 bad network name, missing deployment file, bad keystore/password,
    │   │                           an agent's configuration file (also a ValueError)
    │   └── DeploymentError         a deployment file or deploy parameters that cannot be used
    │       └── DeploymentSchemaError   (also a SchemaVersionError)
    ├── SchemaVersionError          a file or message with a schema version this SDK does not read
    ├── RpcError                    the node answered, but not with what we asked for
    │   ├── TransientRpcError       connection refused, timeout, HTTP 429/5xx: retried with backoff
    │   └── TransactionTimeout      a sent transaction got no receipt in time
    ├── ContractRevert              the contract reverted: `.name` and `.args` of its custom error
    └── IpfsError                   (intellect.sdk.ipfs) fetch/add failures
        ├── InvalidCidError         a string that is not a CID this SDK reads
        ├── CidMismatchError        bytes that do not hash to the CID they were fetched for
        ├── ContentTooLargeError    content over the caller's `max_size`
        └── ContentNotFoundError    no local block and no peer had it

Messages say what failed, why, and what to do. The verifier's and the agents' errors (`ToplocError`,
`TaskSetError`, `RolloutFileError`, `AttestationError`, `EngineError`, `AgentError`, ...) derive from
`IntellectError` too, keeping their `ValueError`/`RuntimeError` base: `except IntellectError` catches
every error the namespace raises on purpose.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CidMismatchError",
    "ConfigError",
    "ContentNotFoundError",
    "ContentTooLargeError",
    "ContractRevert",
    "DeploymentError",
    "DeploymentSchemaError",
    "IntellectError",
    "InvalidCidError",
    "IpfsError",
    "RpcError",
    "SchemaVersionError",
    "TransactionTimeout",
    "TransientRpcError",
]


class IntellectError(Exception):
    """Base class of every error the SDK raises on purpose."""


class ConfigError(IntellectError, ValueError):
    """Configuration that cannot be worked with (network, deployment file, keystore, password, an agent's
    configuration file); the message names the field or file."""


class DeploymentError(ConfigError):
    """A deployment file (`deployments/<chainId>.json`) or deploy parameters that cannot be used, or a
    deployment whose wiring is wrong."""


class SchemaVersionError(IntellectError):
    """A versioned document whose schema this SDK does not read."""

    def __init__(self, what: str, found: object, expected: str) -> None:
        super().__init__(
            f"{what}: schema {found!r} is not supported (this SDK reads {expected!r}); "
            "upgrade intellect-protocol or regenerate the file"
        )
        self.what = what
        self.found = found
        self.expected = expected


class DeploymentSchemaError(DeploymentError, SchemaVersionError):
    """A deployment file of a schema version this SDK does not read."""


class RpcError(IntellectError):
    """The RPC node failed to answer as expected."""


class TransientRpcError(RpcError):
    """A failure worth retrying: connection refused/reset, timeout, HTTP 429 or 5xx."""


class TransactionTimeout(RpcError):
    """A transaction was sent but no receipt arrived within the timeout."""

    def __init__(self, tx_hash: str, timeout: float) -> None:
        super().__init__(
            f"transaction {tx_hash} has no receipt after {timeout:.0f} s; it may still be mined — "
            "check it on the chain before resending"
        )
        self.tx_hash = tx_hash
        self.timeout = timeout


class ContractRevert(IntellectError):
    """A call or transaction reverted. `name` is the custom error (or "Error"/"Panic"/"unknown")."""

    def __init__(self, name: str, args: dict[str, Any] | None = None, *, function: str = "",
                 contract: str = "", raw: str = "") -> None:
        self.name = name
        self.args_ = dict(args or {})
        self.function = function
        self.contract = contract
        self.raw = raw
        where = f"{contract}.{function}" if contract or function else "call"
        rendered = ", ".join(f"{k}={v!r}" for k, v in self.args_.items())
        super().__init__(f"{where} reverted: {name}({rendered})")

    @property
    def error_args(self) -> dict[str, Any]:
        """The custom error's arguments by name (positional ones as arg0, arg1, ...)."""
        return self.args_


class IpfsError(IntellectError):
    """An IPFS operation failed."""


class InvalidCidError(IpfsError, ValueError):
    """A string that is not a CID this SDK can read."""


class CidMismatchError(IpfsError):
    """Fetched bytes do not hash to the CID they were requested for: the source is refused."""

    def __init__(self, cid: str, got: str, source: str = "") -> None:
        src = f" from {source}" if source else ""
        super().__init__(f"content for {cid}{src} hashes to {got}: refused (corrupt or malicious source)")
        self.cid = cid
        self.got = got
        self.source = source


class ContentTooLargeError(IpfsError):
    """The content is larger than the caller's `max_size`."""

    def __init__(self, cid: str, max_size: int, size: int | None = None) -> None:
        have = f"{size} bytes" if size is not None else "more"
        super().__init__(f"{cid} is {have}, over the limit of {max_size} bytes; raise max_size to fetch it")
        self.cid = cid
        self.max_size = max_size
        self.size = size


class ContentNotFoundError(IpfsError):
    """No local copy and no peer could provide the content."""
