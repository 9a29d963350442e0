"""SourcePool: relay choice by measured throughput, in-flight load, and failures."""

from __future__ import annotations

from intellect.sdk.shardcast import SourcePool


def test_pick_unmeasured_sources_first_then_fastest() -> None:
    pool = SourcePool(["http://a", "http://b"])
    first, _ = pool.pick()
    second, _ = pool.pick()
    assert {first, second} == {"http://a", "http://b"}  # both get tried before any is preferred
    pool.release("http://a")
    pool.release("http://b")
    pool.success("http://a", 100_000_000, 0.1)  # 1 GB/s
    pool.success("http://b", 100_000_000, 1.0)  # 100 MB/s
    picks = []
    for _ in range(5):
        url, _ = pool.pick()
        picks.append(url)
        pool.release(url)  # type: ignore[arg-type]
    assert picks == ["http://a"] * 5


def test_pick_spreads_by_inflight_requests() -> None:
    pool = SourcePool(["http://a", "http://b"])
    pool.success("http://a", 300, 1.0)
    pool.success("http://b", 100, 1.0)
    held = [pool.pick()[0] for _ in range(4)]
    # a is 3x faster: it takes requests until its per-request share drops below b's.
    assert held.count("http://a") == 3 and held.count("http://b") == 1


def test_failure_benches_source_and_bad_data_longer() -> None:
    pool = SourcePool(["http://a", "http://b"])
    pool.failure("http://a", bad_data=True)
    pool.failure("http://b")
    url, wait = pool.pick()
    assert url is None and 0 < wait <= 0.5  # b is back after its first backoff, a is out for 300 s
    snap = pool.snapshot()
    assert snap["http://a"]["bad"] == 1 and snap["http://b"]["failures"] == 1


def test_source_reputation_benches_across_pools_and_escalates() -> None:
    from intellect.sdk.shardcast import SourceReputation

    rep = SourceReputation()
    pool = SourcePool(["http://a", "http://b"], reputation=rep)
    pool.failure("http://a", bad_data=True)
    first = rep.benched_until("http://a")
    assert first > 0 and rep.offences("http://a") == 1
    # A new pool (the next download) starts with `a` benched: only `b` is picked.
    later = SourcePool(["http://a/", "http://b"], reputation=rep)
    picks = {later.pick()[0] for _ in range(5)}
    assert picks == {"http://b"}
    # A second offence doubles the bench.
    later.failure("http://a", bad_data=True)
    assert rep.offences("http://a") == 2
    assert rep.benched_until("http://a") - first > 250
    # Without a reputation, the bench lives and dies with the pool.
    assert SourcePool(["http://a"]).pick()[0] == "http://a"


def test_pick_all_sources_benched_long_probes_least_bad_every_10_s() -> None:
    from intellect.sdk.shardcast import SourceReputation

    rep = SourceReputation()
    rep.bad_data("http://only")  # the only upstream once served a corrupt shard: benched 300 s
    pool = SourcePool(["http://only"], reputation=rep)
    # Rather than stalling for the whole bench, it gets one probation request now ...
    assert pool.pick() == ("http://only", 0.0)
    pool.release("http://only")
    # ... and the next one only after PROBATION_AFTER_S.
    url, wait = pool.pick()
    assert url is None and 0 < wait <= 10.0
