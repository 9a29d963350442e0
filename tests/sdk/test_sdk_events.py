"""EventStream: exactly-once delivery across RPC restarts, resumption from a cursor file, reorgs."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from intellect.sdk import (
    ConfigError,
    DecodedEvent,
    EventStream,
    FileCursorStore,
    MemoryCursorStore,
    Protocol,
    Reorg,
    SchemaVersionError,
    dev_account,
)
from intellect.sdk.devnet import Anvil, Devnet, deploy


def _transfers(p: Protocol, n: int, to_index: int = 8) -> None:
    to = dev_account(to_index).address
    for _ in range(n):
        p.transfer(to, 1)


def _keys(evs: list[DecodedEvent]) -> list[tuple[int, int, str]]:
    return [(e.block_number, e.log_index, e.tx_hash) for e in evs]


def test_event_stream_survives_rpc_restart_and_resumes_from_cursor(tmp_path: Path) -> None:
    anvil = Anvil(state_file=tmp_path / "chain-state.json").start()
    try:
        dep = deploy(anvil.url, tmp_path / "deployments")
        p = Protocol.connect(anvil.url, deployment=dep, dev_account_index=0)
        cursor_file = tmp_path / "cursor.json"
        seen: list[DecodedEvent] = []

        def consume(stop_after: int | None = None) -> tuple[EventStream, threading.Thread]:
            reader = Protocol.connect(anvil.url, deployment=dep)
            stream = EventStream(reader, ["Transfer"], cursor_store=FileCursorStore(cursor_file), poll_interval=0.05)

            def cb(e: DecodedEvent) -> None:
                seen.append(e)
                if stop_after is not None and len(seen) >= stop_after:
                    stream.stop()

            t = threading.Thread(target=stream.run, args=(cb,), daemon=True)
            t.start()
            return stream, t

        stream, t = consume()
        _transfers(p, 5)
        assert _wait(lambda: len([e for e in seen if e.args["to"] == dev_account(8).address]) == 5)

        # kill the RPC node mid-stream; the stream keeps retrying; transactions resume after restart
        anvil.stop()
        time.sleep(1.0)
        assert t.is_alive()
        anvil.start()
        _transfers(p, 5)
        assert _wait(lambda: len([e for e in seen if e.args["to"] == dev_account(8).address]) == 10)

        # stop the consumer, produce while nobody listens, resume from the cursor file
        stream.stop()
        t.join(5)
        _transfers(p, 4)
        stream2, t2 = consume()
        assert _wait(lambda: len([e for e in seen if e.args["to"] == dev_account(8).address]) == 14)
        stream2.stop()
        t2.join(5)

        truth = p.get_events(["Transfer"])
        assert _keys(seen) == _keys(truth)  # every event once, in chain order
        assert len(set(_keys(seen))) == len(seen)
        assert json.loads(cursor_file.read_text())["schema"] == "intellect.cursor/v1"
    finally:
        anvil.stop()


def test_event_stream_iterator_and_confirmations(net: Devnet) -> None:
    p = net.protocol(0)
    start = p.block_number() + 1
    _transfers(p, 3)
    stream = EventStream(p, ["Transfer"], from_block=start, confirmations=2, poll_interval=0.01)
    evs, hi, _ = stream.poll()
    # 3 transfers in 3 blocks, the last 2 not yet 2 deep
    assert len(evs) == 1 and hi == p.block_number() - 2
    net.anvil.mine(2)
    got: list[DecodedEvent] = []
    for e in stream:
        got.append(e)
        if len(got) == 3:
            stream.stop()
    assert [e.args["value"] for e in got] == [1, 1, 1]
    assert len(set(_keys(got))) == 3


def test_event_stream_rewinds_on_reorg(net: Devnet) -> None:
    p = net.protocol(0)
    start = p.block_number() + 1
    snap = net.anvil.snapshot()
    _transfers(p, 3, to_index=8)  # chain A
    stream = EventStream(p, ["Transfer"], from_block=start, poll_interval=0.01)
    reorgs: list[Reorg] = []
    delivered: list[DecodedEvent] = []
    stream.run(delivered.append, on_reorg=reorgs.append, until=lambda: len(delivered) >= 3)
    assert [e.args["to"] for e in delivered] == [dev_account(8).address] * 3

    net.anvil.revert(snap)  # drop chain A, build chain B at the same heights
    p2 = net.protocol(0)
    _transfers(p2, 4, to_index=9)
    after: list[DecodedEvent] = []
    stream.run(after.append, until=lambda: len(after) >= 4)
    assert len(reorgs) == 1 and reorgs[0].fork_block == start - 1
    assert [e.args["to"] for e in after] == [dev_account(9).address] * 4
    assert _keys(after) == _keys(p2.get_events(["Transfer"], from_block=start))


def test_cursor_store_refuses_unknown_schema_and_chain(tmp_path: Path, net: Devnet) -> None:
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"schema": "intellect.cursor/v9", "chain_id": 31337, "block": 1}))
    with pytest.raises(SchemaVersionError):
        FileCursorStore(f).load()
    store = MemoryCursorStore()
    p = net.protocol(None)
    s = EventStream(p, ["Transfer"], cursor_store=store)
    store.save(s.cursor.model_copy(update={"chain_id": 1}))
    with pytest.raises(ConfigError, match="chain 1"):
        EventStream(p, ["Transfer"], cursor_store=store)
    with pytest.raises(ConfigError, match="unknown event"):
        EventStream(p, ["NoSuchEvent"])


def _wait(pred, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return False
