"""Write the seed corpora: fuzz/corpus/<reader>/<seed name>, made by the project's own writers
(fuzz/targets.py: `Reader.seeds`). Deterministic, so a rerun after a format change shows in `git diff`.

    python fuzz/make_corpus.py [--reader NAME ...]
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import targets  # noqa: E402


def write(name: str, root: Path = HERE / "corpus") -> int:
    out = root / name
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    seeds = targets.READERS[name].seeds()
    for seed, data in sorted(seeds.items()):
        (out / seed).write_bytes(data)
    return sum(len(d) for d in seeds.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reader", action="append", choices=sorted(targets.READERS), help="only these readers")
    args = ap.parse_args()
    for name in args.reader or sorted(targets.READERS):
        print(f"{name}: {write(name)} bytes")


if __name__ == "__main__":
    main()
