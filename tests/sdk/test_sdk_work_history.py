"""WorkHistory (issue 21): what each lease of a node became as of a past block, from events alone; and what it
costs in RPC requests. A scripted chain of decoded events (the anvil test is tests/roles/test_roles_budget_class.py)."""

from __future__ import annotations

from typing import Any

from intellect.sdk import DecodedEvent, WorkHistory

NODE, OTHER = "0x" + "aa" * 20, "0x" + "bb" * 20
POOL, LEASE, WINDOW = 1, 600, 50


class FakeChain:
    """`get_events` and block timestamps of a scripted chain (block b has timestamp 1000 + 10·b)."""

    def __init__(self) -> None:
        self.events: list[DecodedEvent] = []
        self.deployment = type("D", (), {"block": 1})()
        self.head = 1
        self.get_logs = 0
        self.get_blocks = 0
        outer = self

        class Eth:
            def get_block(self, b: int) -> dict[str, int]:
                outer.get_blocks += 1
                return {"timestamp": outer.time(b)}

        self.w3 = type("W3", (), {"eth": Eth()})()

    @staticmethod
    def time(block: int) -> int:
        return 1000 + 10 * block

    def _ask(self, fn: Any, what: str) -> Any:
        return fn()

    def block_number(self) -> int:
        return self.head

    def emit(self, block: int, event: str, **args: Any) -> None:
        self.head = max(self.head, block)
        self.events.append(DecodedEvent(contract="TaskLedger", event=event, args=args, block_number=block,
                                        block_hash="0x" + "00" * 32, log_index=len(self.events), tx_hash="0x"))

    def get_events(self, names: list[str], *, from_block: int, to_block: int, **_: Any) -> list[DecodedEvent]:
        self.get_logs += 1
        return [e for e in self.events if e.event in names and from_block <= e.block_number <= to_block]

    # a claim at block b and its submission at block s (times from the block numbers)
    def claim(self, task: int, block: int, node: str = NODE, pool: int = POOL) -> None:
        self.emit(block, "TaskClaimed", taskId=task, poolId=pool, node=node, leaseExpiry=self.time(block) + LEASE)

    def submit(self, task: int, block: int, units: int, node: str = NODE, pool: int = POOL) -> None:
        self.emit(block, "WorkSubmitted", submissionId=task, poolId=pool, node=node, rolloutsCid="c",
                  proofsHash=b"", workUnits=units, policyStep=0, reward=0, windowEnd=self.time(block) + WINDOW)


def history(chain: FakeChain) -> WorkHistory:
    return WorkHistory(chain, POOL, lease_duration=LEASE, window_length=WINDOW)


def test_each_lease_outcome_as_of_a_block() -> None:
    c = FakeChain()
    c.emit(2, "NodeRegistered", node=NODE, owner=NODE, role=1, gpuModel="H100", vramGiB=80, gpuCount=1, endpoint="")
    c.claim(1, 3)
    c.submit(1, 5, 100)            # 20 s after its claim; window closes at 1100 (block 10)
    c.claim(2, 6)
    c.submit(2, 7, 100)            # challenged at 8, the challenge rejected at 9: verified after its window (1120)
    c.emit(8, "ChallengeOpened", challengeId=2, node=NODE, challenger=OTHER, evidenceCid="", voteEnd=0, round=1,
           snapshotBlock=7, weight=1)
    c.emit(9, "ChallengeResolved", challengeId=2, upheld=False, weightFor=0, weightAgainst=1, slashed=0)
    c.claim(3, 10)
    c.submit(3, 11, 100)           # challenged at 12, upheld at 20: a failure
    c.emit(12, "ChallengeOpened", challengeId=3, node=NODE, challenger=OTHER, evidenceCid="", voteEnd=0, round=1,
           snapshotBlock=11, weight=1)
    c.claim(4, 15)
    c.submit(4, 16, 100)           # window (to 1210) still open at the wipe (block 20, 1200): voided
    c.emit(20, "ChallengeResolved", challengeId=3, upheld=True, weightFor=1, weightAgainst=0, slashed=1)
    c.emit(20, "WorkerWiped", node=NODE, newEpoch=1)
    c.claim(5, 21)                 # never submitted: expired once its lease (to 1810) ran out
    c.claim(6, 22, node=OTHER)     # another node's
    c.claim(7, 23, pool=2)         # another pool's
    c.emit(24, "NodeUpdated", node=NODE, gpuModel="cpu", vramGiB=0, gpuCount=0, endpoint="")

    def seen(block: int, **kw: Any) -> list[tuple[int, bool, int, int]]:
        return [(o.task_id, o.verified, o.units, o.seconds) for o in h.outcomes(NODE, block, **kw)]

    h = history(c)
    assert seen(9) == []  # 1's window closes at block 10
    # block 12: 1 and 2 verified (2's challenge was rejected); 3 in its window and under challenge
    assert seen(12) == [(1, True, 100, 20), (2, True, 100, 10)]
    assert seen(19) == seen(12)  # 3's challenge still open, 4 in its window
    # block 20: 3 upheld, 4 voided by the wipe; 1 and 2 had closed their windows before it and stay verified
    assert seen(20) == [*seen(12), (3, False, 0, LEASE), (4, False, 0, LEASE)]
    assert seen(21) == seen(20)  # 5's lease is live
    assert seen(200) == [*seen(20), (5, False, 0, LEASE)]
    assert seen(200, limit=2) == [(4, False, 0, LEASE), (5, False, 0, LEASE)]  # the last two, claim order
    assert [o.task_id for o in h.outcomes(OTHER, 200)] == [6]
    # declared hardware as of a block: the update at 24 changes nothing before it
    assert h.declared(NODE, 1) is None
    assert h.declared(NODE, 23) == ("H100", 80, 1)
    assert h.declared(NODE, 24) == ("cpu", 0, 0)
    assert h.claim_block(5) == 21 and h.claim_block(7) is None and h.claim_block(99) is None


def test_rpc_cost_is_incremental() -> None:
    c = FakeChain()
    c.claim(1, 3)
    c.submit(1, 5, 100)
    c.head = 100
    h = history(c)
    h.outcomes(NODE, 100)
    assert (c.get_logs, c.get_blocks) == (1, 1)
    h.outcomes(NODE, 100)            # the same block again: cached, no request
    h.declared(NODE, 100)
    assert (c.get_logs, c.get_blocks) == (1, 1)
    c.head = 101
    h.outcomes(NODE, 101)            # one new block: one eth_getLogs for it, one timestamp
    assert (c.get_logs, c.get_blocks) == (2, 2)
    h.outcomes(NODE, 50)             # an earlier block: no log request (already scanned), its timestamp
    assert (c.get_logs, c.get_blocks) == (2, 3)


def test_a_query_past_the_head_scans_only_to_the_head() -> None:
    c = FakeChain()
    c.claim(1, 3)
    h = history(c)
    assert h.declared(NODE, 50) is None  # block 50 not mined yet (head 3): nothing declared so far
    c.emit(10, "NodeRegistered", node=NODE, gpuModel="H100", vramGiB=80, gpuCount=1)
    c.head = 50
    assert h.declared(NODE, 50) == ("H100", 80, 1)  # mined after the first query: not skipped
    assert h.claim_block(1) == 3


def test_a_rotated_node_keeps_its_record_and_each_key_its_wipes() -> None:
    """NodeKeyRotated (issue 36): as of a block, the new key's leases include the old key's from before the
    rotation; a wipe of the old key voids only the old key's open windows; the hardware declared carries over."""
    c = FakeChain()
    c.emit(2, "NodeRegistered", node=NODE, owner=OTHER, role=1, gpuModel="H100", vramGiB=80, gpuCount=1, endpoint="")
    c.claim(1, 3)
    c.submit(1, 4, 100)            # window to 1090 (block 9)
    c.claim(2, 5)
    c.submit(2, 6, 50)             # window to 1110; its challenge (opened at 7) is upheld after the rotation
    c.emit(7, "ChallengeOpened", challengeId=2, node=NODE, challenger=OTHER, evidenceCid="", voteEnd=0, round=1,
           snapshotBlock=6, weight=1)
    new = "0x" + "cc" * 20
    c.emit(8, "NodeKeyRotated", oldNode=NODE, newNode=new, owner=OTHER, role=1)
    c.claim(3, 9, node=new)
    c.submit(3, 10, 70, node=new)  # window to 1150 (block 15), open at the old key's wipe (block 12)
    c.emit(12, "ChallengeResolved", challengeId=2, upheld=True, weightFor=1, weightAgainst=0, slashed=1)
    c.emit(12, "WorkerWiped", node=NODE, newEpoch=1)
    h = history(c)

    def seen(node: str, block: int) -> list[tuple[int, bool]]:
        return [(o.task_id, o.verified) for o in h.outcomes(node, block)]

    assert seen(new, 7) == []  # before the rotation the new key has no record
    assert seen(new, 11) == [(1, True)]  # the old key's verified lease counts for the new key
    assert seen(new, 20) == [(1, True), (2, False), (3, True)]  # the old key's wipe does not void key 3's work
    assert seen(NODE, 20) == [(1, True), (2, False)]
    assert h.declared(new, 7) is None and h.declared(new, 8) == ("H100", 80, 1)
