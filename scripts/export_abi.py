"""Export the compiled ABIs (and bytecode) to ``sdk/abi/<Contract>.json`` so a pip-installed SDK has them.

Usage:
    brownie compile && python scripts/export_abi.py      # or: brownie run export_abi

Each file is ``{"schema": "intellect.abi/v1", "contractName", "abi", "abiSha256", "errors", "bytecode",
"compiler"}``: ``abi`` is the contract's own ABI (its interface's events and custom errors included);
``errors`` adds the custom errors of the contracts it calls (their reverts bubble up through it), so
the SDK can decode any revert data of a call with one file; ``abiSha256`` = sha256 of the canonical JSON
of ``abi`` (what deployments/<chainId>.json records).
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
BUILD_DIR = ROOT / "build" / "contracts"
ABI_DIR = ROOT / "sdk" / "abi"
ABI_SCHEMA = "intellect.abi/v1"

# contract -> contracts whose reverts can bubble up through its calls
CALLEES: dict[str, tuple[str, ...]] = {
    "IntellectToken": (),
    "NodeRegistry": (),
    "StakeManager": ("IntellectToken", "NodeRegistry"),
    "TaskLedger": ("IntellectToken", "NodeRegistry", "StakeManager"),
    "AttesterBook": ("IntellectToken", "NodeRegistry", "StakeManager", "TaskLedger"),
    # a library linked into TaskLedger: shipped for its bytecode (intellect.sdk.deploy deploys it and links it)
    "PoolRules": (),
}


class AbiExportError(Exception):
    """The build artifacts needed for the export are missing or malformed."""


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def abi_sha256(abi: list[dict]) -> str:
    """sha256 (hex) of the canonical JSON of an ABI."""
    return hashlib.sha256(canonical_json(abi).encode()).hexdigest()


def artifact_abi_sha256(name: str, build_dir: Path = BUILD_DIR) -> str:
    """abiSha256 of contract `name` from its build artifact (the same hash export_abis writes)."""
    return abi_sha256(_artifact(name, build_dir)["abi"])


def _artifact(name: str, build_dir: Path) -> dict:
    path = build_dir / f"{name}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise AbiExportError(f"build artifact {path} unreadable ({exc}); run `brownie compile` first") from exc


def export_abis(build_dir: Path = BUILD_DIR, out_dir: Path = ABI_DIR) -> dict[str, str]:
    """Writes sdk/abi/<Contract>.json for every protocol contract; returns {name: abiSha256}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    artifacts = {name: _artifact(name, build_dir) for name in CALLEES}
    hashes: dict[str, str] = {}
    for name, callees in CALLEES.items():
        abi = artifacts[name]["abi"]
        own = {canonical_json(e) for e in abi if e["type"] == "error"}
        extra: list[dict] = []
        for callee in callees:
            for entry in artifacts[callee]["abi"]:
                key = canonical_json(entry)
                if entry["type"] == "error" and key not in own:
                    own.add(key)
                    extra.append(entry)
        digest = abi_sha256(abi)
        doc = {
            "schema": ABI_SCHEMA,
            "contractName": name,
            "abi": abi,
            "abiSha256": digest,
            "errors": extra,
            "bytecode": "0x" + artifacts[name]["bytecode"].removeprefix("0x"),
            "compiler": artifacts[name].get("compiler", {}),
        }
        path = out_dir / f"{name}.json"
        text = json.dumps(doc, indent=1, sort_keys=True) + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            log.info("exported %s", path)
        hashes[name] = digest
    return hashes


def main() -> None:
    """`brownie run export_abi` (the project is compiled by brownie before a script runs)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name, digest in export_abis().items():
        log.info("%s abiSha256=%s", name, digest)


if __name__ == "__main__":
    try:
        main()
    except AbiExportError as exc:
        sys.exit(f"export_abi: {exc}")
