"""The codebase's shape only gets better (issue 34): `tools/codebase_metrics.py` walks the product with `ast`, and
each figure must stay at or under its committed ceiling. When a change improves a figure, lower its ceiling
here in the same commit; the issue's targets are in the tool's docstring (largest class ≤ 450 lines, each role
≤ 400, imports of our own modules inside functions ≤ 20, private SDK imports from outside the SDK 0, functions
of 80 lines or more ≤ 5).
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "codebase_metrics.py"
_spec = importlib.util.spec_from_file_location("codebase_metrics", TOOL)
assert _spec is not None and _spec.loader is not None
metrics = importlib.util.module_from_spec(_spec)
sys.modules["codebase_metrics"] = metrics
_spec.loader.exec_module(metrics)

# the figures of the last commit that improved one (python tools/codebase_metrics.py); main at 026e503 had
# largest_class 855, roles 64/693/594/448, inner_imports 218, private_sdk_imports 43 (+64 in tests), long_functions 13
CEILINGS = {
    # raised on purpose at the merge of issues 33, 35, 36, 37 and 38 (main after 290cb7a): their protocol work landed in
    # the roles (round_actions, evidence, deltas) and the SDK (deploy, preflight) while ws34 shrank them; the role
    # classes get thinned next (issue 34: <= 400 each)
    "largest_class": 423,  # intellect.sdk._http.HttpServer (issue 34: its descriptor budget and handler adapter moved beside it)
    "role_relay": 64,  # +2: issue 36's replica of the pool's documents (agents/roles/pool_rules.py PoolReplica)
    "role_trainer": 331,  # issue 34: its pieces moved to modules beside it (docs/agents.md); +1: issue 33's slash call
    "role_validator": 390,  # ws34v: challenges, attestations, attester rewards, checkpoints, claim lookup moved out
    "role_worker": 363,  # ws34v: claims, leases and reward claims (agents/roles/leases.py) moved out; Agent.wait_on; adopt_key (issue 36); no 600 s exit waiting for a checkpoint
    "inner_imports": 18,  # the rest defer web3, torch or pyarrow for --help, the relay extra, a v2 reader and the demo parent, or break the adversary matrix cycle (listed by the tool)
    "private_sdk_imports": 0,  # bench and fuzz use the public shardcast/devnet names (ShardServer max_wait, encode_delta, zstd_compress, anvil_binary)
    "private_sdk_imports_tests": 0,  # the shardcast and dashboard unit tests use public names (tests/sdk/test_sdk_public.py)
    "long_functions": 5,  # preflight, deploy, download, warm start, prefill, capture, train_step split (main after ws34v)
}

FIGURES = metrics.measure()

# test files that spell an in-process agent's devnet chain section (role, data_dir, chain.rpc_url,
# chain.deployment_file, chain.dev_account) by hand instead of `role_config` (tests/role_config.py): 13 before
ROLE_CONFIG_COPIES = 0


@pytest.mark.parametrize("figure", sorted(CEILINGS))
def test_figure_is_no_worse_than_its_ceiling(figure: str) -> None:
    got = FIGURES.summary()
    assert figure in got, f"the tool no longer reports {figure}"
    assert got[figure] <= CEILINGS[figure], (
        f"{figure} got worse: {got[figure]} > ceiling {CEILINGS[figure]}; "
        f"run `python tools/codebase_metrics.py` to see the list")


def test_every_figure_has_a_ceiling() -> None:
    assert set(FIGURES.summary()) == set(CEILINGS)


def test_role_tests_build_their_agent_configs_with_one_helper() -> None:
    tests = Path(__file__).resolve().parent
    helper = tests / "role_config.py"
    key = '"chain.deployment_file"' + ":"  # as a dict key of `load_config` overrides
    spelled = sorted(str(p.relative_to(tests)) for p in tests.rglob("*.py")
                     if p not in (helper, Path(__file__).resolve()) and key in p.read_text(errors="replace"))
    assert len(spelled) <= ROLE_CONFIG_COPIES, (
        f"{spelled} spell the devnet chain section by hand: use role_config(devnet, role, data_dir, account, "
        f"overrides) from tests/role_config.py")


def test_the_walk_sees_the_roles_and_the_product() -> None:
    assert set(FIGURES.role_classes) == {"trainer", "validator", "worker", "relay"}
    assert FIGURES.largest_class >= max(FIGURES.role_classes.values())


def _inner(src: str) -> list[str]:
    return [ast.unparse(n) for n in metrics._in_functions(ast.parse(src)) if metrics._own(n)]


def test_inner_imports_counts_only_our_modules_inside_functions() -> None:
    src = ("import intellect.sdk\n"
           "def f():\n    import torch\n    from intellect.verifier import rewards\n"
           "    def g():\n        from . import x\n"
           "class C:\n    def m(self):\n        import intellect.agents\n")
    assert _inner(src) == ["from intellect.verifier import rewards", "from . import x", "import intellect.agents"]


def test_private_sdk_imports_are_seen_in_each_spelling() -> None:
    src = ("from intellect.sdk._fetch import fetch\n"
           "import intellect.sdk.ipfs._cid\n"
           "from intellect.sdk import _config, Protocol\n"
           "from intellect.sdk.devnet import _anvil_binary\n"
           "from intellect.sdk.http import HttpServer\n"
           "from intellect.sdk import ipfs\n"
           "__import__('intellect.sdk.dashboard._collect')\n")
    found = [name for _, name in metrics._private_imports(ast.parse(src))]
    assert found == ["intellect.sdk._fetch", "intellect.sdk.ipfs._cid", "intellect.sdk._config",
                     "intellect.sdk.devnet._anvil_binary", "intellect.sdk.dashboard._collect"]
