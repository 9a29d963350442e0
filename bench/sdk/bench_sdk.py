"""SDK benchmarks, each a ratio against a baseline measured in the same run.

Usage: .venv/bin/python bench/sdk/bench_sdk.py [--mib 64] [--txs 100]

1. compute_cid (UnixFS DAG, Kubo-identical CID) vs plain hashlib.sha256 over the same bytes.
2. EmbeddedIpfs add + verified cat vs writing + reading the same bytes as one file.
3. Protocol.transfer (estimate, capped EIP-1559 fees, nonce manager, receipt + event decoding)
   vs raw web3 (signed legacy-free tx with fixed gas, wait for receipt) on the same anvil.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time
from pathlib import Path

from web3 import Web3

from intellect.sdk import dev_account, devnet
from intellect.sdk.ipfs import EmbeddedIpfs, compute_cid


def _t(fn) -> float:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_ipfs(mib: int) -> None:
    data = os.urandom(mib << 20)
    base = min(_t(lambda: hashlib.sha256(data).digest()) for _ in range(3))
    cid = min(_t(lambda: compute_cid(data)) for _ in range(3))
    print(f"compute_cid {mib} MiB: {cid:.3f} s vs sha256 {base:.3f} s -> {cid / base:.2f}x "
          f"({mib / cid:.0f} MiB/s)")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "plain.bin"
        plain = _t(lambda: (f.write_bytes(data), f.read_bytes()))
        store = EmbeddedIpfs(Path(d) / "store")
        emb = _t(lambda: store.cat(store.add(data)))
        print(f"embedded add+cat {mib} MiB: {emb:.3f} s vs plain file write+read {plain:.3f} s -> {emb / plain:.2f}x")


def bench_tx(n: int) -> None:
    with devnet.start() as net:
        p = net.protocol(0)
        to = dev_account(9).address
        p.transfer(to, 1)  # warm up (allowance/nonce/fees)
        sdk = _t(lambda: [p.transfer(to, 1) for _ in range(n)])
        w3 = Web3(Web3.HTTPProvider(net.url))
        acct = dev_account(1)
        token = w3.eth.contract(address=p.contracts["IntellectToken"].address, abi=p.abis["IntellectToken"])
        p.transfer(acct.address, 10**18)

        def raw() -> None:
            nonce = w3.eth.get_transaction_count(acct.address)
            for i in range(n):
                tx = token.functions.transfer(to, 1).build_transaction(
                    {"from": acct.address, "nonce": nonce + i, "gas": 100_000, "maxFeePerGas": 10**10,
                     "maxPriorityFeePerGas": 10**9, "chainId": 31337})
                h = w3.eth.send_raw_transaction(acct.sign_transaction(tx).raw_transaction)
                w3.eth.wait_for_transaction_receipt(h)

        base = _t(raw)
        print(f"{n} token transfers: SDK {sdk:.2f} s vs raw web3 {base:.2f} s -> {sdk / base:.2f}x "
              f"({n / sdk:.0f} tx/s)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--txs", type=int, default=100)
    a = ap.parse_args()
    bench_ipfs(a.mib)
    bench_tx(a.txs)
