"""Pages cost the page (issue 32): the validator's `GET /attestations` seeks its page in the state's index
(an unauthenticated `limit=1` used to load and decode every attestation ever signed, under the state lock),
reads on a connection of its own so the main loop's writes never wait for it, and every GET of an agent's
server is rate-limited per client."""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from role_config import role_config  # type: ignore[import-not-found]

from intellect.agents.roles import _state
from intellect.agents.roles._runtime import MAX_ATTESTATIONS_PAGE, attestation_page, attestations_reply
from intellect.agents.roles._server import AgentServer, Coalesced, Metrics, RateLimiter
from intellect.agents.roles._state import StateStore

N = 30_000
TIES = 7  # records per updated_at: pages must neither skip nor repeat across equal timestamps


def fill(store: StateStore, n: int, *, seed: int = 0) -> list[int]:
    """`n` attestation records put the way the validator puts them, in a shuffled id order, `TIES` of them per
    clock value (so ids "9" and "10" share timestamps: text order is not id order). Returns the ids in
    (updated_at, id) order."""
    ids = list(range(n))
    random.Random(seed).shuffle(ids)
    ticks = iter(1_700_000_000.0 + i // TIES for i in range(n))
    with pytest.MonkeyPatch.context() as mp, store.transaction():
        mp.setattr(_state, "time", SimpleNamespace(time=lambda: next(ticks)))
        for sid in ids:
            store.put("attestation", sid, "signed", {"attestation": {"submission_id": sid, "pad": "x" * 64}})
    stamp = {sid: i // TIES for i, sid in enumerate(ids)}
    return sorted(ids, key=lambda sid: (stamp[sid], sid))


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Iterator[tuple[StateStore, list[int]]]:
    """30,000 attestations (shared, read only) and their ids in (updated_at, id) order."""
    s = StateStore(tmp_path_factory.mktemp("big") / "state.sqlite")
    order = fill(s, N)
    yield s, order
    s.close()


@pytest.fixture
def store(tmp_path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state.sqlite")
    yield s
    s.close()


def validator_route(store: StateStore):
    """The validator's endpoint (`Validator._get_attestations`: `attestations_reply` over its state store) of a
    validator holding `store`."""
    return lambda query, _body: attestations_reply(store, query)


def get(url: str) -> tuple[int, Any, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            status, raw, headers = resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        status, raw, headers = exc.code, exc.read(), dict(exc.headers)
    return status, json.loads(raw) if headers["Content-Type"] == "application/json" else raw, headers


def count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = _state._decode

    def counting(data: str) -> Any:
        calls[0] += 1
        return real(data)

    monkeypatch.setattr(_state, "_decode", counting)
    return calls


def vm_steps(store: StateStore, since: float, after: int, limit: int) -> int:
    """SQLite virtual-machine instructions one page costs on the store's read connection (the rows it visits)."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    store._reader.set_progress_handler(tick, 1)
    try:
        store.page("attestation", since, after, limit)
    finally:
        store._reader.set_progress_handler(None, 1)
    return steps[0]


def test_a_page_reads_and_decodes_only_the_page_at_30000_records(big, tmp_path, monkeypatch):
    store, order = big
    small = StateStore(tmp_path / "small.sqlite")
    try:
        fill(small, 1_000)
        route = validator_route(store)
        decoded = count_decodes(monkeypatch)
        assert [a["_id"] for a in route({"limit": ["1"]}, None)] == order[:1]
        assert decoded[0] == 1  # the old path decoded all 30,000 for this
        mid = store.record("attestation", order[N // 2])
        page = route({"since": [repr(mid["updated_at"])], "after": [mid["id"]], "limit": [str(MAX_ATTESTATIONS_PAGE)]},
                     None)
        assert [a["_id"] for a in page] == order[N // 2 + 1:N // 2 + 1 + MAX_ATTESTATIONS_PAGE]
        assert decoded[0] == 1 + MAX_ATTESTATIONS_PAGE
        # the rows visited, not only the rows decoded: a page of 30,000 records costs what one of 1,000 does
        big_cost = vm_steps(store, mid["updated_at"], int(mid["id"]), 100)
        first = small.page("attestation", 0.0, -1, 1)[0]
        small_cost = vm_steps(small, first["updated_at"], int(first["id"]), 100)
        assert big_cost < 2 * small_cost, (big_cost, small_cost)
        plan = " ".join(r[3] for r in store._reader.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM records WHERE kind = ? AND (updated_at, CAST(id AS INTEGER)) > (?, ?) "
            "ORDER BY updated_at, CAST(id AS INTEGER) LIMIT ?", ("attestation", 0.0, -1, 5)))
        assert "records_by_time" in plan and "TEMP B-TREE" not in plan, plan
    finally:
        small.close()


def test_paging_over_http_returns_every_record_once_in_id_order_across_ties(big):
    store, order = big
    records = store.records("attestation")
    assert attestation_page(records, 0.0, -1, 10) == store.page("attestation", 0.0, -1, 10)  # the reference agrees
    srv = AgentServer(lambda: {}, Metrics())
    srv.route("GET", "/attestations", validator_route(store))
    seen: list[int] = []
    with srv:
        since, after = 0.0, -1
        while True:  # as the trainer pages: the last item's (_updated_at, _id) is the next cursor
            status, items, _ = get(f"{srv.url}/attestations?since={since!r}&after={after}&limit=256")
            assert status == 200
            seen += [a["_id"] for a in items]
            assert all(a["submission_id"] == a["_id"] for a in items)
            if len(items) < 256:
                break
            since, after = items[-1]["_updated_at"], items[-1]["_id"]
        assert seen == order and len(set(seen)) == N
        for bad in ("limit=0", "limit=257", "after=x", "since=nan", f"after={2**70}", "since=inf"):
            assert get(f"{srv.url}/attestations?{bad}")[0] == 400, bad


def test_an_attestation_updated_again_comes_after_the_cursor_once_more(store):
    for sid in (5, 10, 7):
        store.put("attestation", sid, "signed", {"attestation": {"submission_id": sid}})
    route = validator_route(store)
    page = route({}, None)
    assert [a["_id"] for a in page] == [5, 10, 7]
    cursor = {"since": [repr(page[-1]["_updated_at"])], "after": [str(page[-1]["_id"])]}
    assert route(cursor, None) == []
    store.put("attestation", 10, "posted")  # signed → posted moves it to the end (what a puller has not seen)
    assert [a["_id"] for a in route(cursor, None)] == [10]


def test_the_main_loop_is_not_blocked_while_a_page_is_read_or_encoded(store):
    fill(store, 2_000)
    route = validator_route(store)
    in_encode, release = threading.Event(), threading.Event()

    class SlowToEncode:  # JSON has no form for it: reply_json's default=str calls this while encoding the page
        def __str__(self) -> str:
            in_encode.set()
            release.wait(60)
            return "slow"

    srv = AgentServer(lambda: {}, Metrics())
    srv.route("GET", "/attestations", lambda q, b: [*route(q, b), SlowToEncode()])

    def main_loop_work(tag: int) -> None:  # what the validator's loop does meanwhile
        store.put("attestation", 100_000 + tag, "signed", {"attestation": {"submission_id": tag}})
        with store.transaction():
            store.put("submission", tag, "queued", {"n": tag})
            store.set(f"cursor:{tag}", tag)
        assert store.record("submission", tag)["status"] == "queued"
        store.records("submission", "queued")

    def finishes(fn, *args) -> bool:
        t = threading.Thread(target=fn, args=args, daemon=True)
        t.start()
        t.join(30)  # a liveness guard, not a timing: a blocked writer never finishes
        return not t.is_alive()

    with srv:
        reply: list[Any] = []
        client = threading.Thread(target=lambda: reply.append(get(srv.url + "/attestations?limit=256")), daemon=True)
        client.start()
        assert in_encode.wait(30)
        assert finishes(main_loop_work, 1)  # while the page is being encoded
        release.set()
        client.join(30)
        assert reply and reply[0][0] == 200 and len(reply[0][1]) == 257

    # and while a page's query is part-way through its rows on the read connection
    in_query, release_query = threading.Event(), threading.Event()

    def pause() -> int:
        in_query.set()
        release_query.wait(60)
        return 0

    store._reader.set_progress_handler(pause, 50)
    pages: list[Any] = []
    reader = threading.Thread(target=lambda: pages.append(route({"limit": ["256"]}, None)), daemon=True)
    reader.start()
    assert in_query.wait(30)
    assert finishes(main_loop_work, 2)
    release_query.set()
    reader.join(30)
    store._reader.set_progress_handler(None, 50)
    assert len(pages[0]) == 256


def test_reads_are_rate_limited_per_client_with_retry_after():
    srv = AgentServer(lambda: {"schema": "s"}, Metrics(), read_rate=0.5, read_burst=3)
    srv.route("GET", "/attestations", lambda q, b: [])
    srv.route("POST", "/attestations", lambda q, b: {"ok": True})
    with srv:
        assert [get(srv.url + path)[0] for path in ("/status", "/attestations", "/metrics")] == [200, 200, 200]
        status, body, headers = get(srv.url + "/attestations?limit=1")
        assert status == 429 and "too many requests" in body["error"] and int(headers["Retry-After"]) >= 1
        assert get(srv.url + "/status")[0] == 429
        post = urllib.request.Request(srv.url + "/attestations", data=b"{}", method="POST")
        with urllib.request.urlopen(post, timeout=10) as resp:  # POSTs are bounded by their routes, not here
            assert resp.status == 200
        assert srv.metrics.get("http_rate_limited_total") == 2


def test_the_token_bucket_refills_and_keys_clients_by_address():
    now = [0.0]
    lim = RateLimiter(2.0, 2, max_clients=3, clock=lambda: now[0])
    assert [lim.take("10.0.0.1") for _ in range(3)] == [0.0, 0.0, 0.5]
    assert lim.take("10.0.0.2") == 0.0  # another client has its own bucket
    now[0] = 0.5  # one token back at 2/s
    assert lim.take("10.0.0.1") == 0.0 and lim.take("10.0.0.1") > 0
    # one host's IPv6 addresses share its /64; an IPv4-mapped address is its IPv4 one
    assert lim.client("2001:db8::1") == lim.client("2001:db8::ffff:1") == "2001:db8::/64"
    assert lim.client("::ffff:10.0.0.1") == "10.0.0.1"
    for i in range(10):  # many addresses cost bounded memory (the oldest forgotten: it only starts full again)
        lim.take(f"192.0.2.{i}")
    assert len(lim._buckets) == 3
    assert RateLimiter(0, 1).take("10.0.0.1") == 0.0


def test_concurrent_status_requests_share_one_build():
    started, release = threading.Event(), threading.Event()
    builds = [0]

    def build() -> int:
        builds[0] += 1
        started.set()
        release.wait(30)
        return builds[0]

    c = Coalesced(build)
    results: list[int] = []
    first = threading.Thread(target=lambda: results.append(c()))
    first.start()
    assert started.wait(30)
    others = [threading.Thread(target=lambda: results.append(c())) for _ in range(20)]
    for t in others:
        t.start()
    deadline = time.monotonic() + 30
    while len(c._cond._waiters) < 20 and time.monotonic() < deadline:  # type: ignore[attr-defined]
        time.sleep(0.01)
    release.set()
    for t in [first, *others]:
        t.join(30)
    assert builds[0] == 2 and sorted(results) == [1] + [2] * 20  # the 20 late ones share one fresh build

    def broken() -> int:
        raise RuntimeError("rpc down")

    with pytest.raises(RuntimeError, match="rpc down"):
        Coalesced(broken)()


def test_a_version_1_state_file_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE records (kind TEXT NOT NULL, id TEXT NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL,
                              updated_at REAL NOT NULL, PRIMARY KEY (kind, id));
        CREATE INDEX records_by_status ON records (kind, status);
        INSERT INTO kv VALUES ('_schema_version', '1');
    """)
    db.executemany("INSERT INTO records VALUES ('attestation', ?, 'posted', ?, 5.0)",
                   [(str(i), json.dumps({"attestation": {"submission_id": i}})) for i in (10, 9, 100)])
    db.commit()
    db.close()
    s = StateStore(path)
    try:
        assert s.get("_schema_version") == _state._VERSION == 3
        assert [r["id"] for r in s.page("attestation", 0.0, -1, 10)] == ["9", "10", "100"]
    finally:
        s.close()
    s = StateStore(path)  # opens again as is
    s.set("_schema_version", 99)
    s.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        StateStore(path)


def test_the_trainer_pulls_every_page_of_a_staked_validator(devnet, store, tmp_path):
    """The trainer's `pull_attestations` (`roles/attestation_intake.py`) walks the validator's pages with their cursors (these attestations are
    unsigned, so it refuses each; the cursor still moves past them)."""
    from nodes import staked_node  # type: ignore[import-not-found]

    from intellect.agents.roles.attestation_intake import pull_attestations
    from intellect.agents.roles.trainer import Trainer
    from intellect.sdk import Role

    order = fill(store, 600)
    route = validator_route(store)
    asked: list[dict[str, list[str]]] = []
    srv = AgentServer(lambda: {}, Metrics(), read_rate=20, read_burst=40)
    srv.route("GET", "/attestations", lambda q, b: asked.append(q) or route(q, b))
    with srv:
        v = staked_node(devnet, 1, Role.VALIDATOR, endpoint=srv.url)
        cfg = role_config(devnet, "trainer", tmp_path / "t", 0)
        t = Trainer(cfg)
        try:
            t.connect()
            pull_attestations(t.directory, t.state, t.accept_attestation)
            assert len(asked) == 3  # 256 + 256 + 88
            last = store.record("attestation", order[-1])
            assert t.state.get(f"pulled:{v.address.lower()}") == [last["updated_at"], order[-1]]
            pull_attestations(t.directory, t.state, t.accept_attestation)
            assert len(asked) == 4 and not route(asked[-1], None)  # nothing new: one request, an empty page
        finally:
            t.state.close()
