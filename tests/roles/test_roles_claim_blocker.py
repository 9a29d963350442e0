"""A worker does not claim what the pool could not pay (issue 33; `intellect.agents.roles.leases.claim_blocker`):
claiming in an unfunded or defunded pool, or beyond its own reservation cap, ended as an expired lease on the
node's record, which lowers its budget class. Pure function: the chain reads are `leases.claim_blocked`."""

from __future__ import annotations

from intellect.agents.roles.leases import claim_blocker

T = 10**18
BASE = {"budget": 10_000 * T, "reserved": 0, "reward": 64 * T, "max_reservation_bps": 1_000, "my_reserved": 0,
        "my_stake": 100 * T, "leverage": 10}


def test_a_funded_pool_admits_the_claim():
    assert claim_blocker(**BASE) is None


def test_an_unfunded_or_defunded_pool_blocks_the_claim():
    assert "free budget" in claim_blocker(**{**BASE, "budget": 63 * T})
    assert "announced defund" in claim_blocker(**{**BASE, "announced_defund": 9_950 * T})
    assert claim_blocker(**{**BASE, "announced_defund": 9_936 * T}) is None  # exactly one full reward left


def test_the_node_cap_by_escrow_share_and_by_stake_blocks_the_claim():
    # 10 % of a 10,000 escrow = 1,000; 1,000 - 950 < 64
    assert "cap 1000" in claim_blocker(**{**BASE, "my_reserved": 950 * T}).replace("000000000000000000", "")
    # leverage 10 x 5 INTL of stake = 50 < 64
    assert claim_blocker(**{**BASE, "my_stake": 5 * T}) is not None
    assert claim_blocker(**{**BASE, "my_stake": 5 * T, "leverage": 0}) is None  # no stake bound on this ledger
