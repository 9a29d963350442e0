"""Event streams: decoded protocol events in chain order, resumable, surviving RPC restarts and reorgs.

    stream = EventStream(protocol, ["WorkSubmitted"], cursor_store=FileCursorStore("worker.cursor.json"))
    for event in stream:             # blocks, polling; stream.stop() (another thread) ends it
        handle(event)                # the cursor moves past `event` when the next one is asked for
    stream.run(handle)               # the same with a callback: the cursor moves after handle() returns

The cursor is (block, log index) of the last processed event (or (block, END) once a whole block
range is processed) plus the hashes of the most recent scanned blocks. On every poll the stored
hashes are compared with the chain; if a block we scanned is no longer canonical (a reorg), the
cursor rewinds to the last block whose hash still matches and the events after it are delivered
again from the new chain (`on_reorg` is told first). `confirmations=N` scans only blocks at least
N deep, so reorgs up to N blocks never touch delivered events. Transient RPC failures (the node
restarting, timeouts) are retried with backoff forever, or until `max_outage` seconds.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from typing import Protocol as TypingProtocol

import requests
from pydantic import BaseModel, Field, ValidationError

from ._errors import ConfigError, SchemaVersionError, TransientRpcError
from ._models import DecodedEvent

if TYPE_CHECKING:
    from ._client import Protocol

__all__ = ["CURSOR_SCHEMA", "Cursor", "CursorStore", "EventStream", "FileCursorStore", "MemoryCursorStore", "Reorg"]

log = logging.getLogger(__name__)
CURSOR_SCHEMA = "intellect.cursor/v1"
END = 2**31  # log index meaning "the whole block is processed"


class Cursor(BaseModel):
    """Where a stream stands: everything at positions <= (block, log_index) is processed."""

    schema_: str = Field(default=CURSOR_SCHEMA, alias="schema")
    chain_id: int
    block: int
    log_index: int = END
    hashes: dict[int, str] = Field(default_factory=dict)  # recent scanned block -> hash (reorg detection)

    model_config = {"populate_by_name": True}

    @property
    def position(self) -> tuple[int, int]:
        return (self.block, self.log_index)


class Reorg(BaseModel):
    """A reorganisation seen by the stream: blocks after `fork_block` were replaced."""

    fork_block: int
    old_head: int
    depth: int


class CursorStore(TypingProtocol):
    def load(self) -> Cursor | None: ...

    def save(self, cursor: Cursor) -> None: ...


class MemoryCursorStore:
    def __init__(self) -> None:
        self.cursor: Cursor | None = None

    def load(self) -> Cursor | None:
        return self.cursor

    def save(self, cursor: Cursor) -> None:
        self.cursor = cursor.model_copy(deep=True)


class FileCursorStore:
    """A JSON file, replaced atomically on every save (a crash leaves the old or the new cursor)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def load(self) -> Cursor | None:
        try:
            raw = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"cursor file {self.path} is corrupt ({exc}); delete it to rescan") from None
        if not isinstance(raw, dict) or raw.get("schema") != CURSOR_SCHEMA:
            raise SchemaVersionError(f"cursor file {self.path}", raw.get("schema") if isinstance(raw, dict) else None,
                                     CURSOR_SCHEMA)
        try:
            return Cursor.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError(f"cursor file {self.path} is invalid: {exc}") from None

    def save(self, cursor: Cursor) -> None:
        write_atomic(self.path, cursor.model_dump_json(by_alias=True))


def write_atomic(path: Path, text: str) -> None:
    """Replace `path` with `text`, on disk before the rename (a crash leaves the old file or the new one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cursor-")
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


_TRANSIENT = (TransientRpcError, requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)


class EventStream:
    """Decoded events of `events` (None = all protocol events) from `from_block` on, in order, exactly once."""

    def __init__(self, protocol: Protocol, events: Iterable[str] | None = None, *, from_block: int | None = None,
                 cursor_store: CursorStore | None = None, confirmations: int = 0, reorg_depth: int = 64,
                 poll_interval: float = 1.0, batch_blocks: int = 2_000, filters: dict[str, Any] | None = None,
                 max_outage: float | None = None) -> None:
        self.protocol = protocol
        self.events = list(events) if events is not None else None
        protocol.event_topics(self.events)  # unknown names fail now, not in the loop
        self.from_block = protocol.deployment.block if from_block is None else from_block
        self.store: CursorStore = cursor_store or MemoryCursorStore()
        self.confirmations = confirmations
        self.reorg_depth = reorg_depth
        self.poll_interval = poll_interval
        self.batch_blocks = batch_blocks
        self.filters = filters
        self.max_outage = max_outage
        self.on_reorg: Callable[[Reorg], None] | None = None
        self._stop = threading.Event()
        loaded = self.store.load()
        if loaded is not None and loaded.chain_id != protocol.chain_id:
            raise ConfigError(f"cursor is for chain {loaded.chain_id}, the node is chain {protocol.chain_id}")
        self.cursor = loaded or Cursor(chain_id=protocol.chain_id, block=self.from_block - 1)

    def stop(self) -> None:
        self._stop.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- one poll -------------------------------------------------------------------------------
    def _block_hash(self, n: int) -> str | None:
        blk = self.protocol.w3.eth.get_block(n)
        return None if blk is None else "0x" + bytes(blk["hash"]).hex()

    def _check_reorg(self) -> Reorg | None:
        if not self.cursor.hashes:
            return None
        top = max(self.cursor.hashes)
        if self._block_hash(top) == self.cursor.hashes[top]:
            return None
        fork = None
        for n in sorted(self.cursor.hashes, reverse=True):
            if self._block_hash(n) == self.cursor.hashes[n]:
                fork = n
                break
        if fork is None:  # deeper than we remember: rewind to before the oldest remembered block
            fork = min(self.cursor.hashes) - 1
            log.error("reorg deeper than reorg_depth=%d blocks: rescanning from block %d", self.reorg_depth, fork + 1)
        reorg = Reorg(fork_block=fork, old_head=top, depth=top - fork)
        log.warning("chain reorganisation: blocks %d..%d replaced; rewinding", fork + 1, top)
        self.cursor = Cursor(chain_id=self.cursor.chain_id, block=fork, log_index=END,
                             hashes={n: h for n, h in self.cursor.hashes.items() if n <= fork})
        self.store.save(self.cursor)
        return reorg

    def poll(self) -> tuple[list[DecodedEvent], int | None, Reorg | None]:
        """One scan step: (events after the cursor, last block scanned or None if caught up, reorg seen)."""
        reorg = self._check_reorg()
        head = self.protocol.block_number()
        safe = head - self.confirmations
        lo = self.cursor.block if self.cursor.log_index != END else self.cursor.block + 1
        lo = max(lo, self.from_block)
        if lo > safe:
            return [], None, reorg
        hi = min(safe, lo + self.batch_blocks - 1)
        evs = self.protocol.get_events(self.events, from_block=lo, to_block=hi, filters=self.filters)
        hashes = {n: h for n, h in self.cursor.hashes.items() if n > head - self.reorg_depth}
        for n in range(max(lo, head - self.reorg_depth + 1), hi + 1):
            h = self._block_hash(n)
            if h is None:
                return [], None, reorg
            hashes[n] = h
        for e in evs:  # a log from a block that is no longer canonical: the chain moved under us, retry
            if e.block_number in hashes and hashes[e.block_number] != e.block_hash:
                log.info("block %d changed during the scan; rescanning", e.block_number)
                return [], None, reorg
        self._pending_hashes = hashes
        return [e for e in evs if e.position > self.cursor.position], hi, reorg

    def _commit(self, block: int, log_index: int, hashes: dict[int, str] | None = None) -> None:
        self.cursor = Cursor(chain_id=self.cursor.chain_id, block=block, log_index=log_index,
                             hashes=self.cursor.hashes if hashes is None else hashes)
        self.store.save(self.cursor)

    def _poll_retrying(self) -> tuple[list[DecodedEvent], int | None, Reorg | None]:
        outage_start: float | None = None
        delay = 0.2
        while not self._stop.is_set():
            try:
                return self.poll()
            except _TRANSIENT as exc:
                outage_start = outage_start or time.monotonic()
                if self.max_outage is not None and time.monotonic() - outage_start > self.max_outage:
                    raise TransientRpcError(f"event stream: RPC unavailable for over {self.max_outage} s: {exc}") \
                        from exc
                log.warning("event stream: RPC unavailable (%s); retrying in %.1f s", exc.__class__.__name__, delay)
                self._stop.wait(delay)
                delay = min(delay * 2, 5.0)
        return [], None, None

    # -- consumption ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[DecodedEvent]:
        while not self._stop.is_set():
            evs, hi, reorg = self._poll_retrying()
            if reorg is not None and self.on_reorg is not None:
                self.on_reorg(reorg)
            for e in evs:
                yield e
                self._commit(e.block_number, e.log_index)  # reached only once the consumer asks for more
                if self._stop.is_set():
                    return
            if hi is not None:
                self._commit(hi, END, self._pending_hashes)
            else:
                self._stop.wait(self.poll_interval)

    def run(self, callback: Callable[[DecodedEvent], None], *, on_reorg: Callable[[Reorg], None] | None = None,
            until: Callable[[], bool] | None = None) -> None:
        """Call `callback` for each event; the cursor moves past an event only after the callback returns.
        Runs until `stop()` or `until()` is true. An exception from the callback propagates (the event
        will be delivered again on restart)."""
        if on_reorg is not None:
            self.on_reorg = on_reorg
        while not self._stop.is_set() and not (until and until()):
            evs, hi, reorg = self._poll_retrying()
            if reorg is not None and self.on_reorg is not None:
                self.on_reorg(reorg)
            for e in evs:
                callback(e)
                self._commit(e.block_number, e.log_index)
            if hi is not None:
                self._commit(hi, END, self._pending_hashes)
            elif not (until and until()):
                self._stop.wait(self.poll_interval)


