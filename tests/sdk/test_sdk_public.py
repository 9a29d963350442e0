"""The SDK's public face (issue 34), read from the source with `ast` (function-level imports included):

- no package outside `sdk/` (agents, verifier, scripts, bench, fuzz, tests) imports a private SDK module
  (`intellect.sdk._x`, `intellect.sdk.ipfs._cid`, `from intellect.sdk import _x`, a private name of a public
  module): what another package needs is re-exported by `intellect.sdk`, `intellect.sdk.http`,
  `intellect.sdk.procs`, `intellect.sdk.ipfs`, `intellect.sdk.shardcast` or `intellect.sdk.dashboard`. None
  remains (a white-box reach would be listed below with its reason);
- `intellect.sdk` lists each public name once (`__all__`) and every listed name resolves; it imports web3 and
  eth_account only on first use of a name that needs them, so `import intellect.sdk.ipfs` stays light.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest
from test_codebase_metrics import FIGURES  # type: ignore[import-not-found]

# (file, private module) -> why it is still reached into; remove an entry when its reason goes. Empty since the
# shardcast and dashboard unit tests use public names (Arena, Staging, DeltaHeader, DELTA_MAGIC, zstd_available,
# Origin.delta_encoder, Client(deadline_slack=...), challenge_table): keep it so
ALLOWED: dict[tuple[str, str], str] = {}

PUBLIC_MODULES = ["intellect.sdk", "intellect.sdk.http", "intellect.sdk.procs", "intellect.sdk.ipfs",
                  "intellect.sdk.shardcast", "intellect.sdk.dashboard", "intellect.sdk.poolrules", "intellect.sdk.peers",
                  "intellect.sdk.network"]


def _found() -> set[tuple[str, str]]:
    found = set()
    for item in FIGURES.private_sdk_imports + FIGURES.private_sdk_imports_tests:
        where, name = item.split(" ", 1)
        found.add((where.rsplit(":", 1)[0], name))
    return found


def test_nothing_outside_the_sdk_imports_its_private_modules() -> None:
    bad = sorted(f"{f} imports {m}" for f, m in _found() - set(ALLOWED))
    assert bad == [], "import these from a public SDK module (add the name there if it is missing)"


def test_the_allowed_private_imports_are_still_needed() -> None:
    assert sorted(set(ALLOWED) - _found()) == [], "an allowed private import is gone: remove it from ALLOWED"


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_each_public_module_lists_its_names_once_and_each_resolves(name: str) -> None:
    module = importlib.import_module(name)
    listed = list(module.__all__)
    assert len(listed) == len(set(listed)), sorted({n for n in listed if listed.count(n) > 1})
    missing = [n for n in listed if not hasattr(module, n)]
    assert missing == []


def test_the_sdk_loads_web3_only_on_first_use() -> None:
    code = ("import sys, intellect.sdk, intellect.sdk.ipfs, intellect.sdk.http, intellect.sdk.shardcast\n"
            "assert not [m for m in ('web3', 'eth_account') if m in sys.modules]\n"
            "intellect.sdk.Protocol\n"
            "assert 'web3' in sys.modules\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
