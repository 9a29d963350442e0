"""The dashboard in a real browser: Playwright drives Debian's chromium (headless) against the
dashboard of a devnet with a scripted swarm history; the pages must render that chain's data."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dashboard_scenario import CHROMIUM_FLAGS, Scenario

from intellect.sdk.dashboard import Dashboard, DashboardServer


@pytest.fixture(scope="module")
def browser(chromium_path: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=chromium_path, headless=True,
            args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1000})
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture(scope="module")
def dash(scenario: Scenario) -> Iterator[DashboardServer]:
    with DashboardServer(Dashboard(scenario.reader(), ttl=1.0, status_timeout=1.0), refresh_ms=60_000) as srv:
        yield srv


def _open(browser: Any, url: str) -> Any:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    page.wait_for_selector("body[data-loaded='1']", timeout=30_000)
    assert not errors, errors
    return page


def test_overview_page_renders_chain_data(browser: Any, dash: DashboardServer, scenario: Scenario) -> None:
    page = _open(browser, dash.url + "/")
    try:
        rows = page.locator("#nodes tbody tr")
        assert rows.count() == 5
        honest = page.locator(f"#nodes tr[data-node='{scenario.honest}']")
        assert "H100-80GB" in honest.inner_text() and "8 INTL" in honest.inner_text()
        cheat = page.locator(f"#nodes tr[data-node='{scenario.cheat}']")
        assert "RTX4090" in cheat.inner_text()
        down = page.locator(f"#nodes tr[data-node='{scenario.validators[1]}']")
        assert "down" in down.inner_text()
        assert page.locator("#checkpoints tbody tr").count() == 2
        for cid in scenario.manifest_cids:
            assert page.locator(f"#checkpoints td[title='{cid}']").count() == 1
        sub = page.locator(f"#subs tr[data-sub='{scenario.cheat_sub}'] .badge")
        assert sub.inner_text() == "slashed"
        assert page.locator(f"#subs tr[data-sub='{scenario.cheat_wiped}'] .badge").inner_text() == "wiped"
        for sid in scenario.honest_subs:
            assert page.locator(f"#subs tr[data-sub='{sid}'] .badge").inner_text() == "paid"
        chal = page.locator(f"#chals tr[data-challenge='{scenario.cheat_sub}']")
        assert "upheld" in chal.inner_text() and "uphold" in chal.inner_text()
        assert page.locator("svg[data-chart='reward'] circle.pt").count() == 2
        assert page.locator("svg[data-chart='submissions'] rect.bar").count() == 2
        assert page.locator(".card[data-k='challenges'] .v").inner_text() == "1"
    finally:
        page.close()


def test_node_page_shows_path_to_slash(browser: Any, dash: DashboardServer, scenario: Scenario) -> None:
    page = _open(browser, f"{dash.url}/node/{scenario.cheat}")
    try:
        kinds = page.locator("ol.path li").evaluate_all("els => els.map(e => e.dataset.kind)")
        for k in ("registered", "staked", "task", "proof", "challenged", "verdict", "slash", "wiped"):
            assert k in kinds, kinds
        assert "bad" in (page.locator(".stage[data-stage='reward']").get_attribute("class") or "")
        assert "upheld" in page.locator(".stage[data-stage='verdict']").inner_text()
        assert "adversary" in page.locator("#agent-status").inner_text()
    finally:
        page.close()
    page = _open(browser, f"{dash.url}/node/{scenario.honest}")
    try:
        assert "done" in (page.locator(".stage[data-stage='reward']").get_attribute("class") or "")
        assert "2 rewards" in page.locator(".stage[data-stage='reward']").inner_text()
        assert "2 accepted" in page.locator(".stage[data-stage='verdict']").inner_text()
    finally:
        page.close()


def test_node_page_unknown_node_says_so(browser: Any, dash: DashboardServer) -> None:
    page = _open(browser, f"{dash.url}/node/0x{'ab' * 20}")
    try:
        assert "not registered" in page.locator("#node").inner_text()
    finally:
        page.close()
