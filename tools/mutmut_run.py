"""mutmut 3.8 on the verifier, agents/grpo.py and the agents' rule modules (issue 39).

mutmut 3 names a mutant after its file's path (`src/` stripped): `verifier/toploc.py` would be
`verifier.toploc.x_f__mutmut_1`, but the tests import `intellect.verifier.toploc` (setup.py maps
`verifier/` -> `intellect.verifier` through package_dir, installed editable), so the mutated copy
under `mutants/` would never be loaded, and mutmut stops with "tests recorded trampoline hits but
none match any mutant key". The shim: a staging folder, `build/mutmut/` (ignored by git), where the
path *is* the module name:

    build/mutmut/src/intellect/verifier -> ../../../../verifier      (symlinks, so edits are live)
    build/mutmut/src/intellect/agents   -> ../../../../agents
    build/mutmut/tests                  -> ../../tests
    build/mutmut/pyproject.toml            a copy of ours: [tool.mutmut] and pytest's settings

mutmut copies `src/intellect/...` into `mutants/src/intellect/...` (mutating the files `only_mutate`
names) and puts `mutants/src` first on sys.path. `intellect` is a namespace package (no `__init__`),
so `mutants/src/intellect` becomes its first portion and `import intellect.verifier` loads the
mutated copy; `intellect.sdk`, not copied, still comes from the editable install (its finder is
appended after the path finder). Mutant names are then `intellect.verifier.toploc.x_f__mutmut_1`,
the same as the trampoline's `orig.__module__`.

Usage:
    python tools/mutmut_run.py                         # every module in [tool.mutmut], then the table
    python tools/mutmut_run.py --module verifier/toploc.py --module agents/grpo.py
    python tools/mutmut_run.py --report                # the table of the last run, running nothing
    python tools/mutmut_run.py --survivors             # `mutmut show` of each survivor (not equivalent)
    python tools/mutmut_run.py --fresh ...             # drop build/mutmut/mutants first (all verdicts)

    python tools/mutmut_run.py --module agents/grpo.py --survivors-only   # rerun only the survivors (after new tests)
    INTELLECT_MUTMUT_STAGE=build/mutmut-sandbox python tools/mutmut_run.py --module verifier/sandbox.py
                                                       # its own staging folder: runs side by side

Verdicts are kept in build/mutmut/verdicts.json across runs, per mutant with its function's hash: mutmut resets
every verdict when its test selection changes (a new test file), so a run of the survivors alone would otherwise
forget the mutants the earlier run killed. A verdict is dropped when its function's code changes. Adding tests
can only kill more mutants, so "killed earlier, not rerun" stays true.

Equivalent mutants (no test can tell them from the original) are listed in tools/mutmut_equivalent.txt
(`name  reason`) and left out of the score. Exit 1 when a mutant in scope survived, had no test, or
timed out (not counting the listed equivalents).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# INTELLECT_MUTMUT_STAGE names another staging folder (e.g. build/mutmut-sandbox), so runs on different modules can
# go on side by side in one checkout, each with its own mutants/ and ledger
STAGE = ROOT / os.environ.get("INTELLECT_MUTMUT_STAGE", "build/mutmut")
EQUIVALENT = ROOT / "tools" / "mutmut_equivalent.txt"
PACKAGES = {"verifier": "intellect.verifier", "agents": "intellect.agents"}

# mutmut.stats.status_by_exit_code, grouped for the score
KILLED = {1, 3, 37}
SURVIVED = {0}
NO_TESTS = {5, 33}
TIMEOUT = {36, 24, -24, 152, 255}


def _mutmut_config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]


def stage(tests: list[str] | None = None) -> None:
    """Create (or refresh) build/mutmut: the symlinks and a copy of pyproject.toml (its test selection replaced
    by `tests` when given)."""
    pkg = STAGE / "src" / "intellect"
    pkg.mkdir(parents=True, exist_ok=True)
    links = {pkg / folder: ROOT / folder for folder in PACKAGES} | {STAGE / "tests": ROOT / "tests"}
    for link, target in links.items():
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(os.path.relpath(target, link.parent))
    text = (ROOT / "pyproject.toml").read_text()
    if tests:
        selection = re.compile(r"^pytest_add_cli_args_test_selection = \[.*?^\]", re.S | re.M)
        text, n = selection.subn("pytest_add_cli_args_test_selection = " + json.dumps(tests), text)
        assert n == 1, "pyproject.toml: [tool.mutmut] pytest_add_cli_args_test_selection not found"
    staged = STAGE / "pyproject.toml"
    if not staged.exists() or staged.read_text() != text:
        staged.write_text(text)


def module_of(path: str) -> str:
    """verifier/toploc.py -> intellect.verifier.toploc"""
    folder, _, rest = path.partition("/")
    return ".".join([PACKAGES[folder], *Path(rest).with_suffix("").parts])


def load_equivalent() -> dict[str, str]:
    out: dict[str, str] = {}
    if not EQUIVALENT.exists():
        return out
    for line in EQUIVALENT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        out[name] = reason.strip()
    return out


def in_scope(only_mutate: list[str]) -> list[str]:
    """The repository paths (verifier/x.py) that [tool.mutmut] only_mutate names."""
    paths = []
    for folder in PACKAGES:
        for p in sorted((ROOT / folder).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if any(fnmatch.fnmatch(f"src/intellect/{rel}", pat) for pat in only_mutate):
                paths.append(rel)
    return paths


LEDGER = STAGE / "verdicts.json"


def _function(name: str) -> str:
    """intellect.verifier.toploc.x_f__mutmut_3 -> x_f"""
    return name.rpartition(".")[2].partition("__mutmut_")[0]


def update_ledger(paths: list[str]) -> dict[str, dict]:
    """Merge the meta files' verdicts of `paths` into build/mutmut/verdicts.json; return the ledger.

    Ledger: {module path: {"hash": {function: hash}, "codes": {mutant: exit code}, "seconds": {mutant: s}}}.
    """
    ledger: dict[str, dict] = json.loads(LEDGER.read_text()) if LEDGER.exists() else {}
    for rel in paths:
        meta = STAGE / "mutants" / "src" / "intellect" / f"{rel}.meta"
        if not meta.exists():
            continue
        data = json.loads(meta.read_text())
        old = ledger.get(rel, {"hash": {}, "codes": {}, "seconds": {}})
        hashes = data["hash_by_function_name"]
        codes, seconds = {}, {}
        for name, code in data["exit_code_by_key"].items():
            same = old["hash"].get(_function(name)) == hashes.get(_function(name))
            earlier = old["codes"].get(name)
            # not rerun (None), or rerun with a test selection that does not reach it (33, "no tests") after an
            # earlier run where it survived: the earlier verdict stands
            if same and earlier is not None and (code is None or (code in NO_TESTS and earlier in SURVIVED)):
                codes[name], seconds[name] = earlier, old["seconds"].get(name)
            else:
                codes[name], seconds[name] = code, data["durations_by_key"].get(name)
        ledger[rel] = {"hash": hashes, "codes": codes, "seconds": seconds}
    LEDGER.write_text(json.dumps(ledger, indent=1))
    return ledger


def report(paths: list[str], equivalent: dict[str, str]) -> tuple[list[dict], list[str]]:
    ledger = update_ledger(paths)
    rows, bad = [], []
    for rel in paths:
        if rel not in ledger:
            continue
        codes: dict[str, int | None] = ledger[rel]["codes"]
        row = {"module": rel, "mutants": len(codes), "killed": 0, "survived": 0, "no_tests": 0,
               "timeout": 0, "equivalent": 0, "not_checked": 0, "other": 0,
               "seconds": round(sum(v for v in ledger[rel]["seconds"].values() if v), 1)}
        for name, code in codes.items():
            if name in equivalent:
                row["equivalent"] += 1
            elif code is None:
                row["not_checked"] += 1
            elif code in KILLED:
                row["killed"] += 1
            elif code in SURVIVED:
                row["survived"] += 1
                bad.append(name)
            elif code in NO_TESTS:
                row["no_tests"] += 1
                bad.append(name)
            elif code in TIMEOUT:
                row["timeout"] += 1
            else:
                row["other"] += 1
                bad.append(name)
        counted = row["mutants"] - row["equivalent"] - row["not_checked"]
        row["score"] = round(100 * (row["killed"] + row["timeout"]) / counted, 1) if counted else None
        rows.append(row)
    return rows, bad


def print_table(rows: list[dict]) -> None:
    cols = ["module", "mutants", "killed", "survived", "no_tests", "timeout", "equivalent", "not_checked",
            "score", "seconds"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    total = {c: 0 for c in cols[1:-2]}
    for r in rows:
        print("| " + " | ".join(f"`{r[c]}`" if c == "module" else str(r[c]) for c in cols) + " |")
        for c in total:
            total[c] += r[c]
    counted = total["mutants"] - total["equivalent"] - total["not_checked"]
    if rows and counted:
        score = round(100 * (total["killed"] + total["timeout"]) / counted, 1)
        secs = round(sum(r["seconds"] for r in rows), 1)
        print("| **all** | " + " | ".join(str(total[c]) for c in cols[1:-2]) + f" | {score} | {secs} |")


def run_mutmut(args: list[str]) -> int:
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    cmd = [sys.executable, "-c", "from mutmut.__main__ import cli; cli()", *args]
    print("+ (cd build/mutmut &&", " ".join(cmd[3:]), ")", flush=True)
    return subprocess.call(cmd, cwd=STAGE, env=env)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", default=None,
                    help="run only this file's mutants (repeatable), e.g. verifier/toploc.py")
    ap.add_argument("--mutant", action="append", default=None, help="run only this mutant (repeatable)")
    ap.add_argument("--max-children", type=int, default=2)
    ap.add_argument("--fresh", action="store_true", help="remove build/mutmut/mutants first")
    ap.add_argument("--report", action="store_true", help="print the last run's table and exit")
    ap.add_argument("--survivors", action="store_true", help="show the diff of every survivor and exit")
    ap.add_argument("--survivors-only", action="store_true",
                    help="rerun only the mutants of the chosen modules that survived or had no test")
    ap.add_argument("--tests", nargs="+", default=None,
                    help="test files for this run instead of [tool.mutmut]'s selection (e.g. only the new tests, "
                    "with --survivors-only: the earlier run's kills stay in the ledger)")
    ap.add_argument("--json", type=Path, default=None, help="also write the table here")
    a = ap.parse_args(argv)

    cfg = _mutmut_config()
    paths = in_scope(cfg["only_mutate"])
    if a.module:
        unknown = [m for m in a.module if m not in paths]
        if unknown:
            ap.error(f"not in [tool.mutmut] only_mutate: {unknown}")
        paths = a.module
    equivalent = load_equivalent()

    if not (a.report or a.survivors):
        stage(a.tests)
        if a.fresh:
            shutil.rmtree(STAGE / "mutants", ignore_errors=True)
        names = list(a.mutant or [])
        if a.survivors_only:
            _, bad = report(paths, equivalent)
            names = bad
            if not names:
                print("no survivors to rerun")
        elif a.module and not names:
            names = [f"{module_of(p)}.*" for p in a.module]
        t0 = time.monotonic()
        rc = 0 if (a.survivors_only and not names) else run_mutmut(["run", "--max-children", str(a.max_children), *names])
        print(f"mutmut run: exit {rc}, {time.monotonic() - t0:.0f} s", flush=True)
        if rc != 0:
            return rc

    rows, bad = report(paths, equivalent)
    if a.survivors:
        for name in bad:
            run_mutmut(["show", name])
        return 0
    print_table(rows)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=2) + "\n")
    if bad:
        print(f"\n{len(bad)} not killed (not listed in {EQUIVALENT.relative_to(ROOT)}):")
        for name in bad:
            print("  ", name)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
