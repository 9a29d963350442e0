"""A test-harness fix for a race between brownie 1.22 and anvil: brownie declares a transaction "dropped"
(`TransactionError: Tx dropped without known replacement`) when the sender's nonce has moved past it while its
receipt cannot be read yet. On a loaded machine anvil makes the new nonce visible a moment before the receipt of the
transaction that moved it (seen in fresh-clone CI runs, on an xdist worker's own anvil, about one run in three).
Brownie's receipt thread then marks it dropped, and the call raises although the transaction was mined.

`install()` wraps the account's confirmation step: on exactly that error, it polls the receipt for a few seconds,
and when the transaction is there, it returns brownie's own receipt of it (blocking; a reverted one then raises
as any revert does). A transaction that really is gone still raises the original error. Installed by the conftest
of each test folder that drives brownie (tests/contracts, tests/security)."""

from __future__ import annotations

import time
from typing import Any

__all__ = ["install"]

WAIT_S = 10.0


def install() -> None:
    from brownie import web3
    from brownie.exceptions import TransactionError
    from brownie.network.account import _PrivateKeyAccount
    from brownie.network.transaction import TransactionReceipt
    from web3.exceptions import TransactionNotFound

    original = _PrivateKeyAccount._await_confirmation
    if getattr(original, "_dropped_race_fix", False):
        return

    def await_confirmation(self: Any, receipt: Any, required_confs: int, gas_strategy: Any, gas_iter: Any) -> Any:
        try:
            return original(self, receipt, required_confs, gas_strategy, gas_iter)
        except TransactionError as exc:
            if "dropped without known replacement" not in str(exc):
                raise
            end = time.monotonic() + WAIT_S
            while time.monotonic() < end:
                try:
                    mined = web3.eth.get_transaction_receipt(receipt.txid)
                except TransactionNotFound:
                    mined = None
                if mined is not None and mined["blockHash"] is not None:
                    return TransactionReceipt(receipt.txid, self, silent=receipt._silent,
                                              required_confs=required_confs, name=receipt.fn_name or "")
                time.sleep(0.25)
            raise

    await_confirmation._dropped_race_fix = True  # type: ignore[attr-defined]
    _PrivateKeyAccount._await_confirmation = await_confirmation
