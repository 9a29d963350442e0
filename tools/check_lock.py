#!/usr/bin/env python3
"""Checks that requirements.lock is the resolution of pyproject.toml's dependencies.

The bootstrap runs it before installing, and tests/sdk/test_sdk_lock.py runs it, so a pyproject.toml
edited without `make lock` (or a lock edited by hand) fails with the package that disagrees named:

    python tools/check_lock.py            # exit 0, or 1 with one line per problem
    python tools/check_lock.py --json     # the same, the problems as JSON on stdout: [{kind, package, detail}]
    python tools/check_lock.py --digest   # the input digest that `make lock` writes into the lock

Two checks: the lock's `# input-sha256:` line is the digest of pyproject.toml's dependency lists
(`dependencies`, the `ml` and `dev` extras, `requires-python`), and every one of those requirements
is satisfied by exactly one `name==version` pin in the lock.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

try:  # the venv has packaging; a bare venv (first bootstrap) has pip's vendored copy
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version
except ImportError:  # pragma: no cover - depends on the interpreter
    from pip._vendor.packaging.requirements import InvalidRequirement, Requirement  # type: ignore
    from pip._vendor.packaging.utils import canonicalize_name  # type: ignore
    from pip._vendor.packaging.version import Version  # type: ignore

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("ml", "dev")
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)")
_DIGEST = re.compile(r"^# input-sha256: ([0-9a-f]{64})\s*$", re.M)


class LockError(Exception):
    """pyproject.toml and requirements.lock disagree (or one of them cannot be read)."""


KINDS = ("unreadable", "no-digest", "digest-mismatch", "invalid-requirement", "unpinned", "pin-outside-range")
"""What a problem can be: a file not readable (or a package pinned twice), the lock's `# input-sha256:` line
missing or not pyproject.toml's digest, a requirement pip cannot parse, one the lock does not pin, one its pin
does not satisfy."""


@dataclass(frozen=True)
class Problem:
    """One disagreement: its `kind` (one of KINDS), the package it is about (None for the digest and the files)
    and a readable line for the operator."""

    kind: str
    detail: str
    package: str | None = None

    def __str__(self) -> str:
        return self.detail


def requirements(pyproject: Path) -> dict[str, list[str]]:
    """The dependency lists that the lock resolves, by group."""
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError) as exc:
        raise LockError(f"{pyproject}: cannot read [project]: {exc}") from exc
    optional = project.get("optional-dependencies", {})
    groups = {"dependencies": list(project.get("dependencies", []))}
    for extra in EXTRAS:
        groups[extra] = list(optional.get(extra, []))
    groups["requires-python"] = [project.get("requires-python", "")]
    return groups


def digest(pyproject: Path) -> str:
    blob = json.dumps(requirements(pyproject), sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def pins(lock: Path) -> tuple[dict[str, str], str | None]:
    try:
        text = lock.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LockError(f"{lock}: cannot read: {exc}") from exc
    found: dict[str, str] = {}
    for line in text.splitlines():
        m = _PIN.match(line)
        if m:
            name = canonicalize_name(m.group(1))
            if name in found:
                raise LockError(f"{lock}: {name} is pinned twice")
            found[name] = m.group(2)
    m = _DIGEST.search(text)
    return found, (m.group(1) if m else None)


def problems(pyproject: Path, lock: Path) -> list[Problem]:
    """Every disagreement between the two files (empty: they agree)."""
    out: list[Problem] = []
    locked, recorded = pins(lock)
    want = digest(pyproject)
    if recorded is None:
        out.append(Problem("no-digest", f"{lock.name} has no '# input-sha256:' line (not written by 'make lock')"))
    elif recorded != want:
        out.append(Problem(
            "digest-mismatch",
            f"{lock.name} was resolved from other dependency lists than pyproject.toml's now "
            f"(input-sha256 {recorded[:12]}… != {want[:12]}…)",
        ))
    groups = requirements(pyproject)
    for group in ("dependencies", *EXTRAS):
        for spec in groups[group]:
            try:
                req = Requirement(spec)
            except InvalidRequirement as exc:
                out.append(Problem("invalid-requirement", f"pyproject.toml [{group}] {spec!r}: {exc}"))
                continue
            name = canonicalize_name(req.name)
            if name not in locked:
                out.append(Problem("unpinned", f"pyproject.toml [{group}] needs {spec!r}, which {lock.name} does not pin",
                                   name))
                continue
            version = Version(locked[name])
            # a local version (2.13.0+cpu) satisfies ==2.13.0, as pip treats it
            if not req.specifier.contains(version, prereleases=True) and not req.specifier.contains(
                Version(version.public), prereleases=True
            ):
                out.append(Problem("pin-outside-range",
                                   f"pyproject.toml [{group}] needs {spec!r}, but {lock.name} pins {name}=={version}",
                                   name))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digest", action="store_true", help="print the input digest and exit")
    parser.add_argument("--json", action="store_true", help="also print the problems as JSON on stdout")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    parser.add_argument("--lock", type=Path, default=ROOT / "requirements.lock")
    args = parser.parse_args(argv)
    try:
        if args.digest:
            print(digest(args.pyproject))
            return 0
        found = problems(args.pyproject, args.lock)
    except LockError as exc:
        found = [Problem("unreadable", str(exc))]
    if args.json:
        print(json.dumps([asdict(p) for p in found]))
    for p in found:
        print(f"check_lock: {p}", file=sys.stderr)
    if found:
        print("check_lock: run 'make lock' and commit requirements.lock with the reason", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
