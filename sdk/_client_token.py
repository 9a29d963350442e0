"""`Protocol`'s calls of the token, faucet, permits and access control: one concern of the SDK's contract
client (issue 34 split the class; use them through `intellect.sdk.Protocol`).

`_TokenCalls` is a mixin of `intellect.sdk._client.Protocol`: its methods use the client's `call`, `transact`,
`get_events`, `_ask`, `contracts`, `account` and friends, and are public on `Protocol` under the same names.
"""

from __future__ import annotations

import logging
from typing import Any

from eth_account import Account
from web3 import Web3

from ._client_util import _addr, _plain
from ._errors import ConfigError
from ._models import (
    FaucetInfo,
    Receipt,
)

__all__ = ["_TokenCalls"]

log = logging.getLogger(__name__)


class _TokenCalls:
    """IntellectToken (balances, allowances, the faucet, EIP-2612 permits) and AccessControl of the token, the stake manager and the ledger."""

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
