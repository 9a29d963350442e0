"""What the protocol's transactions would cost on Base at INTELLECT-2's scale (issue 19, scale (c)).

    python bench/scale/cost_model.py                 # markdown table (docs/benchmarks-scale.md)
    python bench/scale/cost_model.py --workers 1000 --l1-base-fee-gwei 30

Inputs, each printed with the table:
- gas per call: measured, from the committed gas report (reports/gas.json, `python tools/gas_report.py`);
- calldata per call: the real ABI encoding (sdk/abi/*.json) of typical arguments (a CIDv1 base32 string of
  59 characters, a bytes32, ids) plus a signed EIP-1559 envelope (~110 bytes: nonce, fees, gas, to, v/r/s);
- Base's fee: L2 execution gas × L2 base+priority fee, plus the L1 data fee of the Ecotone formula
  (OP Stack): calldata gas units (16 per non-zero byte, 4 per zero byte) / 16 ×
  (16 × base_fee_scalar × L1 base fee + blob_base_fee_scalar × L1 blob base fee) / 1e6
  (Fjord's FastLZ size estimate is not modelled: for these small, high-entropy payloads it is close);
- the load: `workers` nodes each submitting one task every `submit_interval_min` minutes (one claimTask + one
  submitWork), rewards claimed in batches of `claim_batch`, the trainer recording one attestation set per
  submission (2 validators) and publishing one checkpoint per `step_min` minutes, challenges on
  `challenge_rate` of submissions (challenge + 1 vote + resolve).

The defaults are assumptions, not quotes: INTELLECT-2's report describes a permissionless pool of
heterogeneous nodes (e.g. 4 × RTX 3090 up to H100 nodes) but we take the worker count as a parameter;
the defaults (100 workers, a submission per worker every 10 minutes, a policy step every 30 minutes)
are the order of magnitude of that run, and the table is printed for 10× that as well. The fee levels
(Base L2 base fee 0.01 gwei, L1 base fee 10 gwei, blob base fee 1 gwei, Base's scalars 2269 / 1055762,
ETH at 3,000 USD) move the result linearly; pass your own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click
from eth_abi import encode

ROOT = Path(__file__).resolve().parents[2]
CID = "bafkreih" + "a" * 52  # a CIDv1 base32 (raw leaves) is 59 characters
ENVELOPE_BYTES = 110  # signed EIP-1559 tx minus calldata: type, chain id, nonce, 2 fees, gas, to, value, v, r, s


def _abi_inputs(contract: str, fn: str) -> list[str]:
    abi = json.loads((ROOT / "sdk" / "abi" / f"{contract}.json").read_text())
    abi = abi["abi"] if isinstance(abi, dict) else abi
    for e in abi:
        if e.get("type") == "function" and e["name"] == fn:
            return [i["type"] for i in e["inputs"]]
    raise KeyError(f"{contract}.{fn} not in sdk/abi")


def calldata(contract: str, fn: str, args: list[object]) -> bytes:
    """4-byte selector (any: it is 4 non-zero bytes for cost purposes) + the ABI-encoded arguments."""
    return b"\x12\x34\x56\x78" + encode(_abi_inputs(contract, fn), args)


def l1_gas_units(data: bytes) -> int:
    zeros = data.count(0)
    return 4 * zeros + 16 * (len(data) - zeros)


@dataclass
class Call:
    name: str  # row of reports/gas.json
    contract: str
    fn: str
    args: list[object]

    def tx_bytes(self) -> bytes:
        return b"\x01" * ENVELOPE_BYTES + calldata(self.contract, self.fn, self.args)


CALLS = {
    "claimTask": Call("TaskLedger.claimTask", "TaskLedger", "claimTask", [1]),
    "submitWork": Call("TaskLedger.submitWork", "TaskLedger", "submitWork", [123456, CID, b"\x5a" * 32, 8192, 1234]),
    "claimRewards": Call("TaskLedger.claimRewards (batch of 6, 2 nodes)", "TaskLedger", "claimRewards",
                         [[100000 + i for i in range(6)]]),
    "recordAttestations": Call("AttesterBook.recordAttestations (2 validators)", "AttesterBook",
                               "recordAttestations", [123456, ["0x" + "ab" * 20, "0x" + "cd" * 20]]),
    "publishCheckpoint": Call("TaskLedger.publishCheckpoint", "TaskLedger", "publishCheckpoint", [1, 1234, CID]),
    "challenge": Call("TaskLedger.challenge", "TaskLedger", "challenge", [123456, CID]),
    "vote": Call("TaskLedger.vote", "TaskLedger", "vote", [77, True]),
}


def measured_gas() -> dict[str, int]:
    rows = json.loads((ROOT / "reports" / "gas.json").read_text())["rows"]
    return {r["call"]: int(r["avg"]) for r in rows}


@click.command()
@click.option("--workers", type=int, multiple=True, default=(100, 1000), show_default=True)
@click.option("--submit-interval-min", type=float, default=10.0, show_default=True)
@click.option("--step-min", type=float, default=30.0, show_default=True)
@click.option("--claim-batch", type=int, default=6, show_default=True)
@click.option("--challenge-rate", type=float, default=0.01, show_default=True)
@click.option("--l2-fee-gwei", type=float, default=0.01, show_default=True, help="Base L2 base + priority fee")
@click.option("--l1-base-fee-gwei", type=float, default=10.0, show_default=True)
@click.option("--blob-base-fee-gwei", type=float, default=1.0, show_default=True)
@click.option("--base-fee-scalar", type=int, default=2269, show_default=True)
@click.option("--blob-base-fee-scalar", type=int, default=1055762, show_default=True)
@click.option("--eth-usd", type=float, default=3000.0, show_default=True)
def main(workers: tuple[int, ...], submit_interval_min: float, step_min: float, claim_batch: int,
         challenge_rate: float, l2_fee_gwei: float, l1_base_fee_gwei: float, blob_base_fee_gwei: float,
         base_fee_scalar: int, blob_base_fee_scalar: int, eth_usd: float) -> None:
    gas = measured_gas()
    l1_price = 16 * base_fee_scalar * l1_base_fee_gwei * 1e9 + blob_base_fee_scalar * blob_base_fee_gwei * 1e9

    def fee_eth(c: Call) -> tuple[int, int, float, float]:
        g = gas[c.name]
        raw = c.tx_bytes()
        l2 = g * l2_fee_gwei * 1e9 / 1e18
        l1 = l1_gas_units(raw) / 16 * l1_price / 1e6 / 1e18
        return g, len(raw), l2, l1

    print("### Per call (measured gas, ABI calldata)\n")
    print("| call | gas (reports/gas.json) | signed tx bytes | L2 fee (USD) | L1 data fee (USD) | total (USD) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    per: dict[str, float] = {}
    for key, c in CALLS.items():
        g, nbytes, l2, l1 = fee_eth(c)
        per[key] = (l2 + l1) * eth_usd
        print(f"| `{c.name}` | {g:,} | {nbytes} | {l2 * eth_usd:.5f} | {l1 * eth_usd:.5f} | {per[key]:.5f} |")

    print("\n### Per day at scale\n")
    print("| workers | submissions/day | tx/day | L2 gas/s | USD/day | USD per submission | share of Base's ~25 Mgas/s |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in workers:
        subs = n * 24 * 60 / submit_interval_min
        steps = 24 * 60 / step_min
        count = {"claimTask": subs, "submitWork": subs, "claimRewards": subs / claim_batch,
                 "recordAttestations": subs, "publishCheckpoint": steps, "challenge": subs * challenge_rate,
                 "vote": subs * challenge_rate}
        usd = sum(per[k] * v for k, v in count.items())
        gas_s = sum(gas[CALLS[k].name] * v for k, v in count.items()) / 86400
        txs = sum(count.values())
        print(f"| {n:,} | {subs:,.0f} | {txs:,.0f} | {gas_s:,.0f} | {usd:,.2f} | {usd / subs:.5f} | "
              f"{gas_s / 25e6:.4%} |")
    print(f"\nAssumptions: a submission per worker every {submit_interval_min:g} min, a policy step every "
          f"{step_min:g} min, rewards claimed in batches of {claim_batch}, {challenge_rate:.0%} of submissions "
          f"challenged (challenge + one vote; resolve not counted), L2 fee {l2_fee_gwei:g} gwei, L1 base fee "
          f"{l1_base_fee_gwei:g} gwei, blob base fee {blob_base_fee_gwei:g} gwei, scalars {base_fee_scalar}/"
          f"{blob_base_fee_scalar}, ETH {eth_usd:,.0f} USD.")


if __name__ == "__main__":
    main()
