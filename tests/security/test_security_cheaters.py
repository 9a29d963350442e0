"""Cheater matrix (issue 5): worker variants (intellect.agents.adversary / adversary.matrix) run as separate
`intellect-agent` processes against an honest validator and trainer on a local pool (anvil + the real
deployment + embedded IPFS + the tiny model). Every cheating submission must end challenged, upheld and
slashed, for the reason its variant predicts, and the trainer must never train on it; `stale_step` must be
refused on-chain. The books must balance afterwards (every token accounted for).

Default run: a representative subset in one pool run, under the profile a pool gets by default (`mixed`).
`-m slow`: the whole matrix in four pool runs, under both verification profiles (`mixed`, the default, and the
strict `fp32`): every cheat must be caught under the profile open pools run, not only under the exact one."""

from __future__ import annotations

from typing import Any

import pytest

from intellect.agents.adversary.matrix import EXPECTED_REASONS
from intellect.sdk import ChallengeStatus

STAKE = 100 * 10**18  # worker.stake_amount (default 100 tokens)
FAST = ["inflated_units", "garbage_file", "chosen_problems"]
# altered_completions was ACCEPTED by the validator under the reference TOPLOC bounds (found by this matrix);
# it is caught since the validator's fp32 profile (test_security_altered.py, docs/security.md)
MATRIX_A = ["wrong_model", "quantised", "altered_completions", "inflated_rewards", "inflated_units", "replay"]
MATRIX_B = ["own_old_work", "chosen_problems", "stale_step", "copied_proofs", "garbage_file", "unresolvable_cid"]
# issue 22: each passed 5e47eb6's validator (TOPLOC fp32 + replay within 2.0 + aggregate). eos_padding is a cheat
# only where the model draws EOS before the budget, which the random tiny model of this pool almost never does:
# it is covered by tests/verifier/test_verifier_exact_sampling.py and the calibration (docs/benchmarks-verifier.md)
MATRIX_C = ["steered_tokens", "best_prefix", "quantised_real_proofs"]
MIXED_NOT_SEPARATED = {"quantised_real_proofs"}
"""Cheats the `mixed` profile documents it does not catch: a cheaper model proven with the real one stays inside
its bf16 tolerance (docs/security.md, issue 22's known limits: 4-bit 0 / 100; docs/benchmarks-verifier.md 1.2).
The matrix runs them under `fp32` only; under `mixed` the other variants of their pool run."""


def assert_books_balance(p: Any) -> dict[str, int]:
    """Every token is somewhere: the balances of every address that ever held tokens sum to the supply; the
    stake manager holds exactly the total stake; the ledger holds every pool's budget + reserve + open bonds.
    Everything is read at one block: the agents are still sending transactions, and balances read at different
    heights miss a transfer between them (seen in CI: the sum 104 tokens short of the supply)."""
    from intellect.sdk import PoolParams

    b = p.block_number()

    def at(contract: str, fn: str, *args: Any) -> Any:
        return p.call(contract, fn, *args, block=b)

    holders: set[str] = set()
    for ev in p.get_events(["Transfer"], from_block=p.deployment.block, to_block=b):
        holders.update({ev.args["from"], ev.args["to"]})
    holders.discard("0x0000000000000000000000000000000000000000")
    balances = {h: int(at("IntellectToken", "balanceOf", h)) for h in holders}
    supply = int(at("IntellectToken", "totalSupply"))
    assert sum(balances.values()) == supply, f"balances {sum(balances.values())} != supply {supply} at block {b}"
    staked = int(at("StakeManager", "totalStaked"))
    sm = p.contracts["StakeManager"].address
    assert balances.get(sm, 0) == staked, (balances.get(sm, 0), staked, b)
    pools = {i: at("TaskLedger", "pool", i) for i in range(1, int(at("TaskLedger", "poolCount")) + 1)}
    escrow = sum(int(v[2]) + int(v[3]) for v in pools.values())
    opened = {int(e.args["challengeId"])
              for e in p.get_events(["ChallengeOpened"], from_block=p.deployment.block, to_block=b)}
    closed = {int(e.args["challengeId"])
              for e in p.get_events(["ChallengeResolved"], from_block=p.deployment.block, to_block=b)}
    bonds = {i: PoolParams.from_tuple(v[1]).challenge_bond for i, v in pools.items()}
    open_bonds = sum(bonds[p.task(i).pool_id] for i in opened - closed)
    ledger = p.contracts["TaskLedger"].address
    assert balances.get(ledger, 0) == escrow + open_bonds, (balances.get(ledger, 0), escrow, open_bonds, b)
    treasury = str(at("StakeManager", "treasury"))
    return {"supply": supply, "staked": staked, "escrow": escrow, "treasury": balances.get(treasury, 0)}


def challenged(validator: Any) -> set[int]:
    """Submissions the validator's challenge has reached the chain for (challenge id = submission id). The
    validator records `opening` before it sends the transaction: those are not on-chain yet."""
    return {c["challenge_id"] for c in validator.status()["challenges"] if c["status"] not in ("opening", "moot",
                                                                                                   "too_late")}


def check_cheater_matrix(swarm: Any, devnet: Any, variants: list[str], profile: str = "mixed") -> dict[str, Any]:
    """Runs `variants` against an honest validator applying verification profile `profile` and asserts every
    claim of the module docstring; returns the rejection reasons and the books for the log."""
    p = devnet.protocol(0)
    pool_id = p.deployment.default_pool_id
    params = p.pool(pool_id).params
    trainer = swarm.add("trainer", "trainer", 0, {"trainer": {"max_steps": 2}}).start()
    swarm.add("relay", "relay", 5).start()
    validator = swarm.add("validator", "validator", 4, {"validator": {"toploc_profile": profile}}).start()
    honest = swarm.add("honest", "worker", 1, {"worker": {"max_tasks": 2}}).start()
    accounts = [a for a in range(2, 24) if a not in (4, 5)]
    cheats = {v: swarm.add(v, "worker", accounts[i], {"worker": {"max_tasks": 1, "adversary": v}}).start()
              for i, v in enumerate(variants)}

    # 1. every cheater acted (submitted, or was refused on-chain)
    def acted(v: str) -> bool:
        st = cheats[v].status()
        subs = st["submissions"]
        if v == "stale_step":
            return any(s["status"] == "refused" for s in subs)
        need = 2 if v == "own_old_work" else 1
        return sum(1 for s in subs if s["status"] == "sent") >= need

    swarm.wait(lambda: all(acted(v) for v in variants), 600, f"cheaters {variants} to act", 2)
    nodes = {v: cheats[v].status()["node"] for v in variants}
    cheat_ids: dict[str, set[int]] = {}
    for v in variants:
        sent = sorted(s["task_id"] for s in cheats[v].status()["submissions"] if s["status"] == "sent")
        cheat_ids[v] = set(sent[1:] if v == "own_old_work" else sent)  # its first submission is honest work

    # 2. stale_step: refused on-chain, nothing of it on the ledger
    if "stale_step" in variants:
        assert not cheat_ids["stale_step"]
        assert not p.submissions(node=nodes["stale_step"])
        refused = {s["status"] for s in cheats["stale_step"].status()["submissions"]}
        assert refused == {"refused"}

    # 3. every cheating submission rejected for the expected reason and challenged
    all_ids = set().union(*cheat_ids.values())
    if cheat_ids.get("unresolvable_cid"):
        # The validator retries an unavailable file while the window leaves more than max(60 s, window/10) to
        # challenge (so a worker's brief IPFS outage costs nothing). Chain time is the latest block's: on a quiet
        # test chain it stops, and the validator would retry until the test gives up. Once the others are
        # challenged, move chain time to just inside that margin, as block production would on a live chain.
        others = all_ids - cheat_ids["unresolvable_cid"]
        swarm.wait(lambda: challenged(validator) >= others, 600, "challenges of the other cheating submissions", 2)
        margin = max(60, params.window_length // 10)
        left = min(p.task(i).window_end for i in cheat_ids["unresolvable_cid"]) - p.chain_time()
        if left > margin - 1:
            devnet.increase_time(left - (margin - 1))
    swarm.wait(lambda: challenged(validator) >= all_ids, 600, "challenges of every cheating submission", 2)
    verdicts = {v["submission_id"]: v for v in validator.status()["verdicts"]}
    reasons: dict[str, list[str]] = {}
    for v, ids in cheat_ids.items():
        reasons[v] = [verdicts[i]["reason"] for i in sorted(ids)]
        for r in reasons[v]:
            assert any(r.startswith(e) for e in EXPECTED_REASONS[v]), f"{v} rejected for {r!r}, expected " \
                                                                       f"{EXPECTED_REASONS[v]}"

    # 4. vote period over (a sole validator on a quorum-1 pool may resolve at once): upheld, slashed
    devnet.increase_time(params.vote_period + 5)
    swarm.wait(lambda: all(p.challenge_info(i).status == ChallengeStatus.UPHELD for i in all_ids), 300,
               "challenges upheld", 2)
    for v, ids in cheat_ids.items():
        if not ids:
            continue
        slashes = p.get_events(["Slashed"], filters={"node": nodes[v]})
        assert slashes, f"no Slashed event for {v}"
        slashed = sum(int(e.args["amount"]) for e in slashes)
        assert slashed > 0
        assert p.active_stake(nodes[v]) == STAKE - slashed, f"{v}: stake {p.active_stake(nodes[v])}, slashed {slashed}"

    # 5. the trainer never trained on cheating work (honest work keeps flowing)
    # policy_step counts a step once trained; its submissions are marked consumed only once its checkpoint is
    # on-chain (CI once read `consumed` in between and found it empty): wait for the consumed ones
    swarm.wait(lambda: trainer.status()["consumed"], 600, "a published training step on honest work", 2)
    status = trainer.status()
    consumed = set(status["consumed"])
    assert status["policy_step"] >= 1
    assert not consumed & all_ids, f"trained on cheating submissions {consumed & all_ids}"
    subs = {s["submission_id"]: s for s in trainer.status()["submissions"]}
    cheat_nodes = {n.lower() for v, n in nodes.items() if v != "own_old_work"}
    assert not {sid for sid in consumed if subs[sid]["node"].lower() in cheat_nodes}
    assert honest.status()["submitted"] >= 1

    books = assert_books_balance(p)
    codes = {name: a.stop(timeout=120) for name, a in swarm.agents.items()}  # slow exits on a loaded machine
    assert codes == dict.fromkeys(swarm.agents, 0), codes
    return {"reasons": reasons, "books": books, "cheat_ids": cheat_ids}


@pytest.mark.timeout(1200)
def test_cheater_matrix_fast_subset_slashed_and_never_trained(sec_swarm, big_devnet):
    out = check_cheater_matrix(sec_swarm, big_devnet, FAST)
    print("cheater reasons:", out["reasons"], "books:", out["books"])


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("profile", ["mixed", "fp32"])
@pytest.mark.parametrize("variants", [MATRIX_A, MATRIX_B, ["altered_completions"], MATRIX_C],
                         ids=["matrix-a", "matrix-b", "altered", "issue-22"])
def test_cheater_matrix_full_slashed_and_never_trained(sec_swarm, big_devnet, variants, profile):
    variants = [v for v in variants if profile == "fp32" or v not in MIXED_NOT_SEPARATED]
    out = check_cheater_matrix(sec_swarm, big_devnet, variants, profile)
    print(f"cheater reasons ({profile}):", out["reasons"], "books:", out["books"])
