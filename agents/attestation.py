"""Validator attestations: a validator's signed word that a submission passed every check.

The trainer trains only on submissions attested by a quorum of staked validators (and not
challenged on-chain). An attestation is an EIP-712 signature by the validator's node key over
(chain id, ledger address) as the domain and (submission id, rollouts CID hash, proofs hash,
policy step, verdict) as the message, so it cannot be replayed on another chain, ledger,
submission or file. Anyone can check it with the validator's address alone.
"""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils import keccak, to_checksum_address
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from intellect.sdk import IntellectError

__all__ = ["ATTESTATION_SCHEMA", "Attestation", "AttestationError", "sign_attestation"]

ATTESTATION_SCHEMA = "intellect.attestation/v1"
#: Largest attestation document a reader parses (a real one is ~500 bytes).
MAX_ATTESTATION_BYTES = 64 * 1024

_TYPES = {
    "EIP712Domain": [
        {"name": "name", "type": "string"},
        {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"},
        {"name": "verifyingContract", "type": "address"},
    ],
    "Attestation": [
        {"name": "submissionId", "type": "uint256"},
        {"name": "rolloutsCidHash", "type": "bytes32"},
        {"name": "proofsHash", "type": "bytes32"},
        {"name": "policyStep", "type": "uint256"},
        {"name": "accepted", "type": "bool"},
    ],
}


class AttestationError(IntellectError, ValueError):
    """An attestation is malformed, of an unknown schema, or its signature does not match."""


class Attestation(BaseModel):
    """A signed verdict on one submission (JSON on the wire, schema `intellect.attestation/v1`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_: str = Field(ATTESTATION_SCHEMA, alias="schema")
    chain_id: int = Field(ge=1)
    ledger: str
    submission_id: int = Field(ge=0)
    rollouts_cid: str = Field(min_length=1, max_length=512)
    proofs_hash: str = Field(pattern=r"^0x[0-9a-fA-F]{64}$")
    policy_step: int = Field(ge=0)
    accepted: bool
    validator: str
    signature: str = Field(pattern=r"^0x[0-9a-fA-F]{130}$")

    @field_validator("schema_")
    @classmethod
    def _known_schema(cls, value: str) -> str:
        if value != ATTESTATION_SCHEMA:
            raise ValueError(f"unknown attestation schema {value!r} (this reader knows {ATTESTATION_SCHEMA})")
        return value

    @field_validator("ledger", "validator")
    @classmethod
    def _address(cls, value: str) -> str:
        try:
            return to_checksum_address(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an address") from None

    @classmethod
    def from_json(cls, data: bytes | str, source: str = "attestation") -> Attestation:
        """Parse one attestation received from another machine; `AttestationError` naming `source` on
        anything malformed (bad UTF-8 or JSON, deep nesting, huge numbers, wrong fields)."""
        if not isinstance(data, bytes | bytearray | str):
            raise AttestationError(f"{source}: expected JSON bytes, got {type(data).__name__}")
        if len(data) > MAX_ATTESTATION_BYTES:
            raise AttestationError(f"{source}: {len(data)} bytes, over the {MAX_ATTESTATION_BYTES}-byte limit")
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise AttestationError(f"{source}: invalid attestation: {exc}") from exc

    @classmethod
    def from_obj(cls, obj: Any, source: str = "attestation") -> Attestation:
        """Validate an already-parsed JSON value (e.g. an HTTP body); `AttestationError` if it is not one."""
        try:
            return cls.model_validate(obj)
        except (ValidationError, RecursionError) as exc:  # RecursionError: a self-referencing object
            raise AttestationError(f"{source}: invalid attestation: {exc}") from exc

    def recover(self) -> str:
        """The address that signed this attestation; `AttestationError` if no address can be recovered."""
        try:
            message = _typed(self.chain_id, self.ledger, self.submission_id, self.rollouts_cid, self.proofs_hash,
                             self.policy_step, self.accepted)
            return to_checksum_address(Account.recover_message(message, signature=self.signature))
        except Exception as exc:  # eth_abi/eth_keys raise several types (a uint256 over 2**256, a bad signature)
            raise AttestationError(
                f"attestation for submission {self.submission_id}: bad signature ({type(exc).__name__}: {exc})"
            ) from exc

    def verify(self) -> None:
        """Raise `AttestationError` unless the signature is the named validator's."""
        signer = self.recover()
        if signer != self.validator:
            raise AttestationError(
                f"attestation for submission {self.submission_id} names validator {self.validator} "
                f"but was signed by {signer}"
            )


def _typed(chain_id: int, ledger: str, submission_id: int, rollouts_cid: str, proofs_hash: str,
           policy_step: int, accepted: bool):
    data = {
        "types": _TYPES,
        "primaryType": "Attestation",
        "domain": {
            "name": "intellect-attestation",
            "version": "1",
            "chainId": chain_id,
            "verifyingContract": to_checksum_address(ledger),
        },
        "message": {
            "submissionId": submission_id,
            "rolloutsCidHash": keccak(text=rollouts_cid),
            "proofsHash": bytes.fromhex(proofs_hash.removeprefix("0x")),
            "policyStep": policy_step,
            "accepted": accepted,
        },
    }
    return encode_typed_data(full_message=data)


def sign_attestation(private_key: bytes | str, *, chain_id: int, ledger: str, submission_id: int,
                     rollouts_cid: str, proofs_hash: str, policy_step: int, accepted: bool = True) -> Attestation:
    """Sign a verdict with the validator's node key."""
    account = Account.from_key(private_key)
    message = _typed(chain_id, ledger, submission_id, rollouts_cid, proofs_hash, policy_step, accepted)
    signed = account.sign_message(message)
    return Attestation(
        schema=ATTESTATION_SCHEMA,
        chain_id=chain_id,
        ledger=ledger,
        submission_id=submission_id,
        rollouts_cid=rollouts_cid,
        proofs_hash=proofs_hash if proofs_hash.startswith("0x") else "0x" + proofs_hash,
        policy_step=policy_step,
        accepted=accepted,
        validator=account.address,
        signature="0x" + signed.signature.hex().removeprefix("0x"),
    )
