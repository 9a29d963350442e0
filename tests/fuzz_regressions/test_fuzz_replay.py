"""Every seed corpus (fuzz/corpus/<reader>/) and every input the fuzzers or their authors found
(tests/fuzz_regressions/<reader>/) replayed through the fuzz targets (fuzz/targets.py), without atheris:
a reader may accept an input or refuse it with its own documented error, nothing else (issue 32).

Also pinned here: the seeds are what the project's writers make today (fuzz/make_corpus.py), and the
specific answers the agent server gives the inputs that once made it answer 500 or read past a body."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUZZ = ROOT / "fuzz"
HERE = Path(__file__).resolve().parent


def _targets():
    spec = importlib.util.spec_from_file_location("intellect_fuzz_targets", FUZZ / "targets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


targets = _targets()


def _inputs(root: Path) -> list[tuple[str, Path]]:
    return sorted((d.name, f) for d in root.iterdir() if d.is_dir() for f in sorted(d.iterdir()) if f.is_file())


SEEDS = _inputs(FUZZ / "corpus")
REGRESSIONS = [(r, f) for r, f in _inputs(HERE) if not f.name.endswith(".py")]


def test_every_reader_has_a_harness_and_seeds() -> None:
    harnesses = {p.stem.removeprefix("fuzz_") for p in FUZZ.glob("fuzz_*.py")}
    assert harnesses == set(targets.READERS)
    seeded = {r for r, _ in SEEDS}
    assert seeded == set(targets.READERS)
    for reader in targets.READERS:
        size = sum(f.stat().st_size for r, f in SEEDS if r == reader)
        assert 0 < size <= 100 * 1024, f"{reader}'s seed corpus is {size} bytes"
    assert {r for r, _ in REGRESSIONS} <= set(targets.READERS)


@pytest.mark.parametrize("reader", sorted(targets.READERS))
def test_seed_corpus_is_what_the_writers_make(reader: str) -> None:
    committed = {f.name: f.read_bytes() for r, f in SEEDS if r == reader}
    made = targets.READERS[reader].seeds()
    # signatures and random test data are deterministic; a change here means a writer changed its format:
    # rerun `python fuzz/make_corpus.py` and commit the corpus with the change
    assert set(committed) == set(made)
    for name, data in made.items():
        assert committed[name] == data, f"fuzz/corpus/{reader}/{name} differs from what the writer makes now"


@pytest.mark.parametrize(("reader", "path"), SEEDS, ids=[f"{r}/{p.name}" for r, p in SEEDS])
def test_seed_replays(reader: str, path: Path) -> None:
    _replay(reader, path)


@pytest.mark.timeout(60)  # the quadratic input took minutes before its fix, ~0.05 s after
@pytest.mark.parametrize(("reader", "path"), REGRESSIONS, ids=[f"{r}/{p.name}" for r, p in REGRESSIONS])
def test_regression_replays(reader: str, path: Path) -> None:
    _replay(reader, path)


def _replay(reader: str, path: Path) -> None:
    """The reader reads `path` or refuses it with one of its documented errors; anything else the target turns
    into a `Finding` (an undocumented exception, a 500, a logged server error, a failed round trip)."""
    try:
        targets.READERS[reader].target(path.read_bytes())
    except targets.Finding as exc:
        pytest.fail(f"{reader}: {path.name}: {exc}")


def _http(data: bytes) -> list[bytes]:
    """Status lines the agent server answers `data` (one connection's bytes) with."""
    conn = targets._Conn(data)
    server = targets._agent_server()
    targets.serve_one(server, conn)
    return [line for line in bytes(conn.sent).split(b"\r\n") if line.startswith(b"HTTP/1.")]


@pytest.mark.parametrize("name", ["body_not_utf8", "body_int_over_4300_digits", "body_nested_past_recursion_limit",
                                  "content_length_not_a_number"])
def test_agent_server_answers_400_to_bodies_that_are_not_json(name: str) -> None:
    assert _http((HERE / "agent_http" / name).read_bytes()) == [b"HTTP/1.1 400 Bad Request"]


def test_agent_server_never_reads_past_a_negative_content_length() -> None:
    # Content-Length -1 made the server read the connection to its end (no bound on memory); now it is refused
    # and the connection closed, so what follows is not read at all
    assert _http((HERE / "agent_http" / "content_length_negative").read_bytes()) == [b"HTTP/1.1 400 Bad Request"]


def test_agent_server_does_not_run_a_refused_body_as_a_request() -> None:
    # a body over the cap is refused (413) unread; it used to be parsed as the connection's next request
    assert _http((HERE / "agent_http" / "content_length_over_max_then_body_as_request").read_bytes()) == [
        b"HTTP/1.1 413 Request Entity Too Large"]


def test_seeds_reach_acceptance() -> None:
    """The seeds are valid documents (not only refusals): a harness that never reached the accepting path
    would fuzz the error handling alone."""
    assert _http((FUZZ / "corpus" / "agent_http" / "status").read_bytes()) == [b"HTTP/1.1 200 OK"]
    assert _http((FUZZ / "corpus" / "agent_http" / "attestation").read_bytes()) == [b"HTTP/1.1 200 OK"]
    assert _http((FUZZ / "corpus" / "agent_http" / "store").read_bytes()) == [b"HTTP/1.1 200 OK"]
    from intellect.agents.attestation import Attestation
    from intellect.sdk.poolrules import PoolRules
    from intellect.sdk.shardcast import Manifest
    from intellect.verifier.tasks import TaskSet

    Attestation.from_json((FUZZ / "corpus" / "attestation" / "accepted").read_bytes()).verify()
    assert PoolRules.from_bytes((FUZZ / "corpus" / "poolrules" / "all_fields").read_bytes()).class_history == 0
    assert len(Manifest.from_bytes((FUZZ / "corpus" / "manifest" / "nested").read_bytes()).files) == 4
    assert len(TaskSet.from_bytes((FUZZ / "corpus" / "taskset" / "math_and_code").read_bytes())) == 2
