"""A challenge rejected inside the window and opened again (a second round): the dashboard's row shows the
latest round's votes and tally, and every vote and verdict on the nodes' paths carries its own round's."""

from __future__ import annotations

from intellect.sdk import DecodedEvent
from intellect.sdk.dashboard import challenge_table

NODE, V1, V2, V3, V4, V5 = ("0x" + c * 40 for c in "abcdef")


def _block_time(n: int) -> int:
    return 1_000 + n


def _ev(block: int, event: str, **args) -> DecodedEvent:
    return DecodedEvent(contract="TaskLedger", event=event, args=args, block_number=block, block_hash="0x" + "00" * 32,
                        log_index=0, tx_hash="0x" + f"{block:064x}")


def _opened(block: int, challenger: str, rnd: int) -> DecodedEvent:
    return _ev(block, "ChallengeOpened", challengeId=7, node=NODE, challenger=challenger, evidenceCid=f"bafkev{rnd}",
               voteEnd=10_000, round=rnd, snapshotBlock=block - 1, weight=100)


def _vote(block: int, validator: str, uphold: bool) -> DecodedEvent:
    return _ev(block, "VoteCast", challengeId=7, validator=validator, uphold=uphold, weight=100)


def _resolved(block: int, upheld: bool, wf: int, wa: int) -> DecodedEvent:
    return _ev(block, "ChallengeResolved", challengeId=7, upheld=upheld, weightFor=wf, weightAgainst=wa,
               slashed=50 if upheld else 0)


def test_reopened_challenge_votes_and_tally_are_each_rounds_own() -> None:
    events = [_opened(10, V1, 1), _vote(11, V2, False), _vote(12, V3, False), _resolved(13, False, 100, 200),
              _opened(20, V4, 2), _vote(21, V5, True), _resolved(22, True, 200, 0)]
    (row,), paths = challenge_table(events, 5_000, _block_time)
    assert (row.round, row.status, row.challenger, row.evidence_cid) == (2, "upheld", V4, "bafkev2")
    assert (row.votes_for, row.votes_against) == (2, 0)
    assert [(v.validator, v.uphold) for v in row.votes] == [(V5, True)]
    assert row.slashed == 50

    verdicts = [pe.detail for pe in paths[NODE] if pe.kind == "verdict"]
    assert verdicts == ["challenge 7 rejected (1 for, 2 against; stake 100 for, 200 against)",
                        "challenge 7 (round 2) upheld (2 for, 0 against; stake 200 for, 0 against)"]
    assert [pe.detail for pe in paths[V3.lower()]] == ["voted reject on challenge 7"]
    assert [pe.detail for pe in paths[V5.lower()]] == ["voted uphold on challenge 7 (round 2)"]
    assert [pe.detail for pe in paths[V4.lower()]] == [f"opened a challenge again (round 2) of submission 7 "
                                                            f"({NODE})"]


def test_open_second_round_counts_only_its_own_votes() -> None:
    events = [_opened(10, V1, 1), _vote(11, V2, False), _vote(12, V3, False), _resolved(13, False, 100, 200),
              _opened(20, V4, 2)]
    (row,), _ = challenge_table(events, 5_000, _block_time)
    assert (row.round, row.status, row.votes_for, row.votes_against, row.votes) == (2, "open", 1, 0, [])
    assert row.seconds_left == 10_000 - 5_000


def test_a_round_that_missed_its_quorum_reads_no_quorum_not_rejected() -> None:
    # ChallengeResolved's outcome 4 (ChallengeStatus.NoQuorum, issue 33): upheld is false, but nobody lost
    missed = _ev(13, "ChallengeResolved", challengeId=7, upheld=False, outcome=4, weightFor=100, weightAgainst=0,
                 slashed=0)
    (row,), paths = challenge_table([_opened(10, V1, 1), missed], 5_000, _block_time)
    assert row.status == "no quorum"
    (verdict,) = [pe for pe in paths[NODE] if pe.kind == "verdict"]
    assert (verdict.outcome, verdict.detail) == ("no quorum", "challenge 7 no quorum (1 for, 0 against; stake 100 for, "
                                                              "0 against)")
    rejected = _ev(13, "ChallengeResolved", challengeId=7, upheld=False, outcome=3, weightFor=100, weightAgainst=200,
                   slashed=0)
    (row,), _ = challenge_table([_opened(10, V1, 1), rejected], 5_000, _block_time)
    assert row.status == "rejected"
