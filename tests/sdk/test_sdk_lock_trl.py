"""requirements-trl.lock (the opt-in TRL baseline's additions, tools/bootstrap-trl.sh) fits requirements.lock:
resolved against this very main lock (its recorded sha256), pins only packages the main lock does not pin (so
installing both in one pip command never meets two pins of one package), every pin hash-checked, trl among them.
After `make lock` this fails until `make lock-trl` re-resolves it, as the bootstrap refuses to install it."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


def _pins(text: str) -> dict[str, str]:
    return {m.group(1).lower().replace("_", "-"): m.group(2) for m in PIN.finditer(text)}


def test_trl_lock_fits_the_main_lock() -> None:
    main = (ROOT / "requirements.lock").read_text()
    trl = (ROOT / "requirements-trl.lock").read_text()
    recorded = re.search(r"^# main-lock-sha256: ([0-9a-f]{64})$", trl, re.M)
    assert recorded, "requirements-trl.lock has no main-lock-sha256 line"
    assert recorded.group(1) == hashlib.sha256(main.encode()).hexdigest(), (
        "requirements-trl.lock was resolved against another requirements.lock: run `make lock-trl`")
    extra, base = _pins(trl), _pins(main)
    assert extra.get("trl") == "1.16.0"
    assert not set(extra) & set(base), f"pinned in both locks: {sorted(set(extra) & set(base))}"
    blocks = re.split(r"\n(?=[A-Za-z0-9])", trl.split("\n\n", 1)[1].strip())
    assert len(blocks) == len(extra)
    for block in blocks:
        assert "--hash=sha256:" in block, f"no hash for {block.splitlines()[0]}"


def test_bootstrap_trl_installs_both_locks_hash_checked_and_leaves_the_main_venv_alone() -> None:
    script = (ROOT / "tools" / "bootstrap-trl.sh").read_text()
    assert "--require-hashes --no-deps" in script and "-r requirements.lock -r requirements-trl.lock" in script
    assert 'VENV="$ROOT/.venv-trl"' in script and "/.venv/bin/pip" not in script
    assert ".venv-trl/" in (ROOT / ".gitignore").read_text().splitlines()
