"""Off-chain EIP-712 signatures for the dev chain: a node key's registration consent (NodeRegistry) and an
ERC-2612 permit (IntellectToken), signed the way the SDK does. Shared by tests and tools/gas_report.py."""

from __future__ import annotations

from typing import Any

from eth_account import Account
from eth_account.messages import encode_typed_data

_DOMAIN = [
    {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
    {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"},
]
_REGISTER = [
    {"name": "node", "type": "address"}, {"name": "owner", "type": "address"},
    {"name": "role", "type": "uint8"}, {"name": "deadline", "type": "uint256"},
    {"name": "nonce", "type": "uint256"},
]
_PERMIT = [
    {"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
    {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
]


def _sign(signer: Any, primary: str, fields: list, domain_name: str, contract: Any, message: dict) -> Any:
    from brownie import web3

    typed = {
        "types": {"EIP712Domain": _DOMAIN, primary: fields},
        "primaryType": primary,
        "domain": {"name": domain_name, "version": "1", "chainId": web3.eth.chain_id,
                   "verifyingContract": contract.address},
        "message": message,
    }
    return Account.sign_message(encode_typed_data(full_message=typed), signer.private_key)


def registration_signature(registry: Any, node: Any, owner: Any, role: int, deadline: int,
                           nonce: int | None = None) -> bytes:
    """The node key's signature allowing `owner` to register it with `role` (nonce: the registry's current)."""
    message = {"node": node.address, "owner": str(owner), "role": role, "deadline": deadline,
               "nonce": registry.nonces(node) if nonce is None else nonce}
    return _sign(node, "Register", _REGISTER, "IntellectNodeRegistry", registry, message).signature


def permit_signature(token: Any, holder: Any, spender: Any, value: int, deadline: int,
                     nonce: int | None = None) -> Any:
    """`holder`'s ERC-2612 permit for `spender` (the signed message: .v, .r, .s)."""
    message = {"owner": holder.address, "spender": str(spender), "value": value,
               "nonce": token.nonces(holder) if nonce is None else nonce, "deadline": deadline}
    return _sign(holder, "Permit", _PERMIT, "Intellect", token, message)
