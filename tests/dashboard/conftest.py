"""Fixtures of the dashboard tests: a devnet with a scripted swarm history (every protocol step done
with the SDK against anvil + the real deployment) and agents' /status served over HTTP."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from dashboard_scenario import CHROMIUM, TOKEN, Scenario, serve_status, status_doc

from intellect.sdk import devnet
from intellect.sdk.ipfs import compute_cid
from intellect.sdk.procs import free_port


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    """A swarm's history on a fresh devnet, played with the SDK:
    trainer publishes steps 0 and 1; an honest worker (2 submissions) and a cheating worker
    (2 submissions) register, stake, claim, submit; validator A challenges the cheat, validator B
    votes uphold; after the vote period the challenge is resolved (slash; the cheat's other,
    unchallenged submission is wiped with it); after the window the
    honest worker claims its rewards. Validator B's agent is down (its endpoint refuses)."""
    net = devnet.start(tmp_path_factory.mktemp("dash-devnet"))
    servers: list[Any] = []
    try:
        pool_id = net.deployment.default_pool_id or 1
        t, hw, cw, va, vb = (net.protocol(i) for i in (0, 1, 2, 3, 4))
        manifests = [compute_cid(f"manifest step {s}".encode()) for s in (0, 1)]
        steps = [{"step": 0, "mean_reward": 0.25, "rollouts_used": 0},
                 {"step": 1, "mean_reward": 0.625, "rollouts_used": 16}]
        srv_t, url_t = serve_status(status_doc("trainer", t.address, steps=steps))
        srv_h, url_h = serve_status(status_doc("worker", hw.address, submissions=2))
        srv_c, url_c = serve_status(status_doc("worker", cw.address, adversary="wrong_model"))
        srv_a, url_a = serve_status(status_doc("validator", va.address, challenges=1))
        servers += [srv_t, srv_h, srv_c, srv_a]
        down = f"http://127.0.0.1:{free_port()}"
        t.register_node("trainer", gpu_model="cpu", endpoint=url_t)
        t.publish_checkpoint(pool_id, 0, manifests[0])
        for p, role, gpu, url in ((hw, "worker", ("H100-80GB", 80, 8), url_h), (cw, "worker", ("RTX4090", 24, 1), url_c),
                                  (va, "validator", ("cpu", 0, 0), url_a), (vb, "validator", ("cpu", 0, 0), down)):
            p.drip()
            p.register_node(role, gpu_model=gpu[0], vram_gib=gpu[1], gpu_count=gpu[2], endpoint=url)
            p.stake(p.address, 100 * TOKEN)
        c1 = hw.claim_task(pool_id)
        s1 = hw.submit_work(c1.task_id, compute_cid(b"rollouts honest 1"), b"\x11" * 32, 4, 0)
        t.publish_checkpoint(pool_id, 1, manifests[1])
        c2 = hw.claim_task(pool_id)
        s2 = hw.submit_work(c2.task_id, compute_cid(b"rollouts honest 2"), b"\x12" * 32, 4, 1)
        c3 = cw.claim_task(pool_id)
        s3 = cw.submit_work(c3.task_id, compute_cid(b"rollouts cheat"), b"\x33" * 32, 4, 1)
        c4 = cw.claim_task(pool_id)
        s4 = cw.submit_work(c4.task_id, compute_cid(b"rollouts cheat 2"), b"\x34" * 32, 4, 1)
        va.challenge(s3.submission_id, compute_cid(b"evidence: proofs do not match step 1"))
        vb.vote(s3.submission_id, True)
        pool = t.pool(pool_id)
        net.increase_time(pool.params.vote_period + 1)
        va.resolve(s3.submission_id)
        net.increase_time(pool.params.window_length + 1)
        hw.claim_all_rewards()
        yield Scenario(net=net, pool_id=pool_id, trainer=t.address, honest=hw.address, cheat=cw.address,
                       validators=[va.address, vb.address], down_endpoint=down, manifest_cids=manifests,
                       honest_subs=[s1.submission_id, s2.submission_id], cheat_sub=s3.submission_id,
                       cheat_wiped=s4.submission_id,
                       servers=servers)
    finally:
        for s in servers:
            s.stop()
        net.stop()


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if not CHROMIUM.exists() or shutil.which(str(CHROMIUM)) is None:
        pytest.skip("Debian chromium is not installed at /usr/bin/chromium: run `make bootstrap` as root "
                    "(tools/bootstrap.d/40-chromium.sh) or `apt-get install chromium`")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("python playwright is not installed (the dev extra): pip install -e '.[dev]'")
    return str(CHROMIUM)


@pytest.fixture
def fresh_devnet(tmp_path: Any) -> Iterator[Any]:
    """A devnet of this test's own (anvil on a free port, the contracts deployed), stopped after it."""
    net = devnet.start(tmp_path / "deployments")
    try:
        yield net
    finally:
        net.stop()
