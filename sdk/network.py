"""A network found from one name: the signed network descriptor (issue 36).

A joiner needs one thing, the descriptor's URL (or a path to a copy of it), and gets everything else from it, the
chain and the chain's peers: the chain id, RPC URLs to try in order, and the deployment (contract addresses, the
deployment block, the default pool). The network's admin signs it, so a mirror or a gateway cannot alter it:

    {"schema": "intellect.network/v1", "name": "intellect-devnet", "chainId": 31337,
     "rpcUrls": ["http://10.0.0.1:8545"], "deployment": {...intellect.deployment/v1...},
     "issuedAt": 1795000000, "signer": "0x...", "signature": "0x..."}

Checks, in order, each failing by name (`NetworkDescriptorError`, `SchemaVersionError` for another schema):
the document is at most `MAX_DESCRIPTOR_BYTES` and JSON of this shape; a URL of the form `.../ipfs/<cid>/...` is
served the bytes of that CID; the signature (EIP-191, over the canonical JSON of every field but `signature`)
recovers `signer`; `signer` is the deployment's `deployer` and `chainId` the deployment's. Once connected,
`Protocol.connect(descriptor=...)` also checks that the chain answers with that chain id and that `signer`
holds the admin role of the network's token there (`check_on_chain`): a descriptor signed by anyone else is
refused, whatever its bytes say.

What a signature does not give: a joiner trusts whoever gave it the name (the URL, or the CID inside it), as it
would trust a deployment file handed over by hand; the signature binds the descriptor to the chain's admin and
lets mirrors carry it unaltered.

    desc = sign_network(deployment, name="my-net", rpc_urls=["https://rpc.example"], account=deployer)
    path = write_network(desc, Path("network.json"))       # publish its bytes at a URL or on IPFS
    desc = load_network("https://example.org/network.json")
    p = Protocol.connect(descriptor=desc, keystore=...)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eth_account import Account
from eth_account.messages import encode_defunct
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._config import Deployment
from ._errors import ConfigError, IntellectError, SchemaVersionError
from ._fetch import PeerHttpError, fetch
from .ipfs import compute_cid

__all__ = [
    "MAX_DESCRIPTOR_BYTES",
    "NETWORK_SCHEMA",
    "NetworkDescriptor",
    "NetworkDescriptorError",
    "check_on_chain",
    "load_network",
    "parse_network",
    "sign_network",
    "write_network",
]

NETWORK_SCHEMA = "intellect.network/v1"
MAX_DESCRIPTOR_BYTES = 256 * 1024
"""Largest descriptor read (a real one is ~3 KB: the deployment and a few URLs)."""
MAX_RPC_URLS = 16


class NetworkDescriptorError(ConfigError):
    """A network descriptor that cannot be used: unreadable, malformed, altered, or signed by the wrong key."""


class NetworkDescriptor(BaseModel):
    """`intellect.network/v1`: the network's one name resolves to this (see the module docstring)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    schema_: str = Field(NETWORK_SCHEMA, alias="schema")
    name: str = Field(min_length=1, max_length=64)
    chain_id: int = Field(alias="chainId", gt=0)
    rpc_urls: list[str] = Field(alias="rpcUrls", min_length=1, max_length=MAX_RPC_URLS)
    deployment: Deployment
    issued_at: int = Field(alias="issuedAt", ge=0)
    signer: str = Field(pattern=r"^0x[0-9a-fA-F]{40}$")
    signature: str = Field("", pattern=r"^(0x[0-9a-fA-F]{130})?$")

    @field_validator("rpc_urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname or len(url) > 512:
                raise ValueError(f"rpcUrls: {url[:80]!r} is not an http(s) or ws(s) URL")
        return urls

    def signed_bytes(self) -> bytes:
        """What the signature covers: the canonical JSON (sorted keys, no spaces) of every field but `signature`."""
        doc = self.model_dump(mode="json", by_alias=True, exclude={"signature"})
        return NETWORK_SCHEMA.encode() + b"\n" + json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    def to_bytes(self) -> bytes:
        return (self.model_dump_json(by_alias=True, indent=2) + "\n").encode()

    def recovered_signer(self) -> str | None:
        """The address the signature recovers, None if it recovers none."""
        try:
            return str(Account.recover_message(encode_defunct(primitive=self.signed_bytes()),
                                               signature=self.signature))
        except Exception:  # eth_keys raises several types for a malformed signature
            return None


def sign_network(deployment: Deployment, *, name: str, rpc_urls: list[str], account: LocalAccount,
                 issued_at: int | None = None) -> NetworkDescriptor:
    """The descriptor of `deployment`, signed by `account` (which must be the deployment's deployer)."""
    if not deployment.deployer:
        raise NetworkDescriptorError("the deployment names no deployer: a descriptor is signed by the deployer (the "
                                     "token's admin), whom readers check it against")
    if deployment.deployer.lower() != account.address.lower():
        raise NetworkDescriptorError(f"the descriptor must be signed by the deployer {deployment.deployer}, "
                                     f"not {account.address}: pass the deployer's keystore")
    try:
        desc = NetworkDescriptor(name=name, chainId=deployment.chain_id, rpcUrls=list(rpc_urls),
                                 deployment=deployment, issuedAt=int(time.time()) if issued_at is None else issued_at,
                                 signer=account.address)
    except ValidationError as exc:
        raise NetworkDescriptorError(f"network descriptor: {_first(exc)}") from None
    sig = account.sign_message(encode_defunct(primitive=desc.signed_bytes())).signature
    return desc.model_copy(update={"signature": "0x" + bytes(sig).hex()})


def write_network(desc: NetworkDescriptor, path: Path) -> Path:
    """Write the descriptor atomically; returns `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(desc.to_bytes())
    tmp.replace(path)
    return path


def _first(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ())) or "document"
    return f"{where}: {err.get('msg', 'invalid')}"


def parse_network(data: bytes, source: str) -> NetworkDescriptor:
    """The verified descriptor in `data` (read from `source`, named in every error)."""
    if len(data) > MAX_DESCRIPTOR_BYTES:
        raise NetworkDescriptorError(f"network descriptor {source} is {len(data)} bytes, over {MAX_DESCRIPTOR_BYTES}")
    try:
        raw: Any = json.loads(data)
    except (ValueError, RecursionError) as exc:  # not UTF-8/JSON, an int over 4300 digits, deep nesting
        raise NetworkDescriptorError(f"network descriptor {source} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise NetworkDescriptorError(f"network descriptor {source} is not a JSON object")
    if raw.get("schema") != NETWORK_SCHEMA:
        raise SchemaVersionError(f"network descriptor {source}", raw.get("schema"), NETWORK_SCHEMA)
    try:
        desc = NetworkDescriptor.model_validate(raw)
    except SchemaVersionError:  # the embedded deployment's schema
        raise
    except RecursionError:
        raise NetworkDescriptorError(f"network descriptor {source} is nested too deeply") from None
    except ValidationError as exc:
        cause = exc.errors()[0].get("ctx", {}).get("error")
        if isinstance(cause, SchemaVersionError):
            raise cause from None
        raise NetworkDescriptorError(f"network descriptor {source} is invalid: {_first(exc)}") from None
    if not desc.signature:
        raise NetworkDescriptorError(f"network descriptor {source} is not signed")
    got = desc.recovered_signer()
    if got is None or got.lower() != desc.signer.lower():
        raise NetworkDescriptorError(f"network descriptor {source}: its signature is not {desc.signer}'s "
                                     f"(the document was altered or signed by another key)")
    if desc.deployment.deployer.lower() != desc.signer.lower():
        raise NetworkDescriptorError(f"network descriptor {source} is signed by {desc.signer}, but its deployment's "
                                     f"deployer is {desc.deployment.deployer or 'not named'}")
    if desc.deployment.chain_id != desc.chain_id:
        raise NetworkDescriptorError(f"network descriptor {source} names chain {desc.chain_id}, but its deployment "
                                     f"is for chain {desc.deployment.chain_id}")
    return desc


def _cid_in(url: str) -> str | None:
    """The CID of a gateway URL's `/ipfs/<cid>` path, else None."""
    parts = [p for p in urlsplit(url).path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "ipfs":
        return parts[1]
    return None


def load_network(src: str | Path, *, deadline: float = 15.0) -> NetworkDescriptor:
    """The verified descriptor at `src`: an http(s) URL (a gateway's `/ipfs/<cid>` URL is checked against its
    CID) or a file path."""
    text = str(src)
    if text.startswith(("http://", "https://")):
        try:
            reply = fetch("GET", text, deadline=deadline, max_bytes=MAX_DESCRIPTOR_BYTES)
        except PeerHttpError as exc:
            raise NetworkDescriptorError(f"network descriptor {text} could not be fetched: {exc}") from None
        if reply.status != 200:
            raise NetworkDescriptorError(f"network descriptor {text}: HTTP {reply.status}")
        data = reply.body
        if (cid := _cid_in(text)) is not None and compute_cid(data) != cid:
            raise NetworkDescriptorError(f"network descriptor {text}: the gateway served other bytes than CID {cid}")
        return parse_network(data, text)
    path = Path(text)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_DESCRIPTOR_BYTES + 1)
    except OSError as exc:
        raise NetworkDescriptorError(f"network descriptor {path} cannot be read: {exc.strerror or exc}") from None
    return parse_network(data, str(path))


def check_on_chain(desc: NetworkDescriptor, protocol: Any) -> None:
    """Refuse a descriptor whose signer is not the admin of the network's token on the chain `protocol` reads."""
    if protocol.chain_id != desc.chain_id:
        raise NetworkDescriptorError(f"network {desc.name!r} is chain {desc.chain_id}, the RPC node is chain "
                                     f"{protocol.chain_id}")
    try:
        admin = bool(protocol.call("IntellectToken", "hasRole", b"\x00" * 32, to_checksum_address(desc.signer)))
    except IntellectError as exc:
        raise NetworkDescriptorError(f"network {desc.name!r}: its token at "
                                     f"{desc.deployment.address('IntellectToken')} cannot be read: {exc}") from None
    if not admin:
        raise NetworkDescriptorError(f"network {desc.name!r} is signed by {desc.signer}, who is not the admin of its "
                                     f"token on chain {desc.chain_id}: refused")
