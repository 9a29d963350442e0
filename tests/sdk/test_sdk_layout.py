"""What the SDK may import, read from the source with `ast` (function-level imports and code in string
literals included):

- nothing of the brownie scripts (`scripts.*`): the devnet deploys with `intellect.sdk.deploy` and the bytecode
  shipped in the package, and the scripts import the SDK, never the other way round;
- one HTTP client across the product (SDK, verifier, agents): `intellect.sdk._fetch` (total deadlines),
  `http.client` only there and in Shardcast's shard downloader, `requests` only where web3's
  HTTPProvider's exceptions are classified.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from import_graph import imports, modules, within  # type: ignore[import-not-found]

import intellect.agents
import intellect.sdk
import intellect.verifier
from intellect.sdk import devnet

REPO = Path(__file__).resolve().parents[2]
# an import statement naming `scripts` (also inside a string run by `python -c`)
_SCRIPTS_IMPORT = re.compile(r"^\s*(from\s+scripts(\.|\s)|import\s+scripts\b)", re.MULTILINE)


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


SDK = modules(intellect.sdk)
PRODUCT = {**SDK, **modules(intellect.verifier), **modules(intellect.agents)}
TREES = {m: ast.parse(p.read_text(), str(p)) for m, p in PRODUCT.items()}
IMPORTS = {m: imports(m, PRODUCT[m], TREES[m]) for m in PRODUCT}


def test_the_sdk_imports_nothing_of_scripts() -> None:
    assert "intellect.sdk.devnet" in SDK and len(SDK) > 20
    bad = [f"{m} imports {imp}" for m in SDK for imp in IMPORTS[m] if within(imp, "scripts")]
    bad += [f"{m} runs code that imports scripts: {s.strip()[:80]!r}" for m in SDK for s in _strings(TREES[m])
            if _SCRIPTS_IMPORT.search(s)]
    assert bad == []


def test_the_scripts_import_rule_sees_a_snippet() -> None:
    # the check above would have caught the old devnet, which ran `from scripts.deploy import deploy_all` via -c
    assert _SCRIPTS_IMPORT.search('import os\nfrom scripts.deploy import deploy_all\n')
    assert _SCRIPTS_IMPORT.search("import scripts._deployment")
    assert not _SCRIPTS_IMPORT.search("see scripts/deploy_devnet.py and `brownie run deploy`")


def test_the_devnet_deploys_from_the_package_not_the_checkout() -> None:
    # every contract the deploy creates ships its bytecode in the package; the devnet runs no program of a checkout
    from intellect.sdk.deploy import DEPLOY_ORDER, load_artifact

    for name in DEPLOY_ORDER:
        assert len(load_artifact(name)["bytecode"]) > 100, name
    src = Path(devnet.__file__).read_text()
    assert "subprocess.run" not in src and "scripts/" not in src and "sys.executable" not in src


@pytest.mark.parametrize(("library", "allowed"), [
    ("requests", {"intellect.sdk._tx", "intellect.sdk._events"}),  # web3's HTTPProvider raises requests' errors
    ("http.client", {"intellect.sdk._fetch", "intellect.sdk.shardcast._download"}),
    ("urllib.request", set()),
    ("aiohttp", set()),
])
def test_one_http_client_across_the_product(library: str, allowed: set[str]) -> None:
    users = {m for m in PRODUCT for imp in IMPORTS[m] if within(imp, library)}
    assert users <= allowed, sorted(users - allowed)
