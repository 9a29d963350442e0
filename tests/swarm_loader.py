"""tests/roles/conftest.py (Swarm, AgentProc, POOL_RULES) for the other test folders that start agent swarms
(security, net): loaded once under its own module name, since every folder's conftest is named conftest."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_NAME = "_intellect_roles_swarm_helpers"
_CONFTEST = Path(__file__).resolve().parent / "roles" / "conftest.py"


def roles_helpers() -> Any:
    """The tests/roles conftest module (loaded on first use)."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    spec = importlib.util.spec_from_file_location(_NAME, _CONFTEST)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[_NAME] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def running_swarm(devnet: Any, tmp_path: Path, *, settle: float = 0.0) -> Iterator[Any]:
    """The roles tests' Swarm of agent processes on `devnet` (under `tmp_path/swarm`), stopped on exit, then
    `settle` seconds for their sockets to close."""
    s = roles_helpers().Swarm(devnet, tmp_path / "swarm")
    s.root.mkdir()
    try:
        yield s
    finally:
        s.stop()
        time.sleep(settle)
