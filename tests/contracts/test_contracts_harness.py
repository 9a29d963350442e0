"""The harness's fix for brownie's "dropped" race (tests/brownie_dropped_race.py): a mined transaction whose
receipt cannot be read at the moment brownie sees the sender's nonce move on is recovered, not reported dropped;
a transaction that is really not there still raises."""

from __future__ import annotations

import pytest
from brownie import accounts, web3
from brownie.exceptions import TransactionError
from contracts_helpers import TOKEN
from web3.exceptions import TransactionNotFound


def _receipts_hidden(monkeypatch, hide):
    """The next receipt reads of the chain answer 'not found' while `hide(call number)` is true."""
    real = web3.eth.get_transaction_receipt
    calls = {"n": 0}

    def flaky(txid, *a, **k):
        calls["n"] += 1
        if hide(calls["n"]):
            raise TransactionNotFound(f"hidden: {txid}")
        return real(txid, *a, **k)

    monkeypatch.setattr(web3.eth, "get_transaction_receipt", flaky)
    return calls


def test_a_mined_transaction_whose_receipt_lags_is_recovered(net, monkeypatch):
    calls = _receipts_hidden(monkeypatch, lambda n: n <= 2)  # brownie's thread sees no receipt, the nonce moved
    before = net.token.balanceOf(accounts[5])
    tx = net.token.transfer(accounts[5], TOKEN, {"from": accounts[0]})
    assert tx.status == 1 and net.token.balanceOf(accounts[5]) == before + TOKEN
    assert calls["n"] > 2  # the receipt was asked again after the hidden reads


def test_a_transaction_that_never_shows_still_raises(net, monkeypatch):
    import brownie_dropped_race

    monkeypatch.setattr(brownie_dropped_race, "WAIT_S", 1.0)
    _receipts_hidden(monkeypatch, lambda n: True)
    with pytest.raises(TransactionError, match="dropped without known replacement"):
        net.token.transfer(accounts[5], TOKEN, {"from": accounts[0]})
