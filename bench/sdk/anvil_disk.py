"""What a stopped anvil leaves on disk, with and without `--max-persisted-states 0` (the flag `sdk.devnet.Anvil`
and brownie's development network now pass), in one run.

    .venv/bin/python bench/sdk/anvil_disk.py --txs 3000

Past its in-memory history (~500 blocks) anvil writes each block's state under ~/.foundry/anvil/tmp and does not
remove the directory when stopped with SIGTERM, so every demo and test chain leaked it. Each case starts anvil,
sends `--txs` one-wei transfers (one block each), stops it, and measures the directories that appeared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

from intellect.sdk.devnet import Anvil, anvil_binary
from intellect.sdk.procs import free_port, wait_until

TMP = Path.home() / ".foundry" / "anvil" / "tmp"


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _unflagged() -> Anvil:
    """Anvil as `sdk.devnet.Anvil` started it before the change: the same command without the flag."""
    port = free_port()
    anvil = Anvil(port=port)
    anvil.proc = subprocess.Popen([anvil_binary(), "--host", "127.0.0.1", "--port", str(port), "--chain-id", "31337"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if not wait_until(lambda: anvil.rpc("eth_chainId") is not None, 30.0):
        anvil.stop()
        raise SystemExit("anvil did not start")
    return anvil


def leftover(flagged: bool, txs: int) -> tuple[int, int]:
    """(bytes, directories) a stopped anvil leaves after `txs` transactions (one block each)."""
    before = set(TMP.glob("*")) if TMP.is_dir() else set()
    anvil = Anvil().start() if flagged else _unflagged()
    try:
        sender = anvil.rpc("eth_accounts")[0]
        for i in range(txs):
            anvil.rpc("eth_sendTransaction", [{"from": sender, "to": "0x000000000000000000000000000000000000dEaD",
                                               "value": hex(i + 1)}])
    finally:
        anvil.stop()  # SIGTERM, as the demo and the tests stop it
    new = (set(TMP.glob("*")) if TMP.is_dir() else set()) - before
    size = sum(_size(d) for d in new)
    for d in new:
        shutil.rmtree(d, ignore_errors=True)
    return size, len(new)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--txs", type=int, default=3000)
    args = ap.parse_args()
    before, after = leftover(False, args.txs), leftover(True, args.txs)
    print(json.dumps({"txs": args.txs, "before_bytes": before[0], "before_dirs": before[1], "after_bytes": after[0],
                      "after_dirs": after[1]}))
    print(f"left on disk after {args.txs} blocks: before {before[0] / 2**20:.0f} MiB in {before[1]} dir(s), "
          f"after {after[0] / 2**20:.1f} MiB in {after[1]} dir(s)")


if __name__ == "__main__":
    main()
