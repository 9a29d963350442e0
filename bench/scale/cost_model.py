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
  submitWork), rewards claimed in batches of `claim_batch`, 2 used attestations per submission, a checkpoint
  published every `step_min` minutes, challenges on `challenge_rate` of submissions (challenge + 1 vote);
- the attestations, both ways side by side (issue 38): **per submission** (today's `recordAttestations` of 2
  validators per submission, and each validator's `claimAttesterReward` per submission) and **per step** (one
  `recordAttestationRoot` per policy step; each of `validators` claims its leaves of the step with one multiproof,
  `claimAttesterRewards`, whose gas is interpolated between the measured 1-leaf and many-leaf rows and whose
  calldata is the real encoding of that many leaves and a proof of 2·log2(leaves of the step) hashes).

The defaults are assumptions, not quotes: INTELLECT-2's report describes a permissionless pool of
heterogeneous nodes (e.g. 4 × RTX 3090 up to H100 nodes) but we take the worker count as a parameter;
the defaults (100 workers, a submission per worker every 10 minutes, a policy step every 30 minutes)
are the order of magnitude of that run, and the table is printed for 10× that as well. The fee levels
(Base L2 base fee 0.01 gwei, L1 base fee 10 gwei, blob base fee 1 gwei, Base's scalars 2269 / 1055762,
ETH at 3,000 USD) move the result linearly; pass your own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import click
from eth_abi import encode

ROOT = Path(__file__).resolve().parents[2]
CID = "bafkreih" + "a" * 52  # a CIDv1 base32 (raw leaves) is 59 characters
ENVELOPE_BYTES = 110  # signed EIP-1559 tx minus calldata: type, chain id, nonce, 2 fees, gas, to, value, v, r, s


def _type(i: dict) -> str:
    """an ABI input's type string, tuples spelled out for eth_abi: (uint256,uint256)[]"""
    t = i["type"]
    if t.startswith("tuple"):
        return "(" + ",".join(_type(c) for c in i["components"]) + ")" + t[len("tuple"):]
    return t


def _abi_inputs(contract: str, fn: str) -> list[str]:
    abi = json.loads((ROOT / "sdk" / "abi" / f"{contract}.json").read_text())
    abi = abi["abi"] if isinstance(abi, dict) else abi
    for e in abi:
        if e.get("type") == "function" and e["name"] == fn:
            return [_type(i) for i in e["inputs"]]
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
    "claimAttesterReward": Call("AttesterBook.claimAttesterReward", "AttesterBook", "claimAttesterReward",
                                [123456, "0x" + "ab" * 20]),
    "recordAttestationRoot": Call("AttesterBook.recordAttestationRoot (60 leaves)", "AttesterBook",
                                  "recordAttestationRoot", [1, b"\x77" * 32, 4800, 10**21, CID]),
    "publishCheckpoint": Call("TaskLedger.publishCheckpoint", "TaskLedger", "publishCheckpoint", [1, 1234, CID]),
    "challenge": Call("TaskLedger.challenge", "TaskLedger", "challenge", [123456, CID]),
    "vote": Call("TaskLedger.vote", "TaskLedger", "vote", [77, True]),
}


def measured_gas() -> dict[str, int]:
    rows = json.loads((ROOT / "reports" / "gas.json").read_text())["rows"]
    return {r["call"]: int(r["avg"]) for r in rows}


def leaf_claim_gas(gas: dict[str, int], leaves: int) -> float:
    """Gas of one `claimAttesterRewards` of `leaves` leaves: linear between the gas report's 1-leaf row and its
    many-leaf row (the per-leaf work is the same reads and writes; the proof grows by a log)."""
    one = gas["AttesterBook.claimAttesterRewards (1 leaf)"]
    name, many = max(((k, v) for k, v in gas.items() if k.startswith("AttesterBook.claimAttesterRewards (")
                      and not k.endswith("(1 leaf)")), key=lambda kv: kv[1])
    k = int(name.rsplit("(", 1)[1].split()[0])
    return one + (leaves - 1) * (many - one) / (k - 1)


def leaf_claim_bytes(leaves: int, step_leaves: int) -> bytes:
    """The signed transaction of one `claimAttesterRewards` of `leaves` consecutive leaves of a step's root of
    `step_leaves` leaves: the leaves, and a multiproof of about 2·log2(step_leaves) hashes."""
    depth = max(1, math.ceil(math.log2(max(step_leaves, 2))))
    proof = [bytes([i + 1]) * 32 for i in range(2 * depth)]
    args = [1, b"\x77" * 32, "0x" + "ab" * 20, [(10_000 + i, 123_456 + i, 2 * 10**18) for i in range(leaves)], proof,
            [True] * (leaves - 1) + [False] * len(proof)]
    return b"\x01" * ENVELOPE_BYTES + calldata("AttesterBook", "claimAttesterRewards", args)


@click.command()
@click.option("--workers", type=int, multiple=True, default=(100, 1000), show_default=True)
@click.option("--submit-interval-min", type=float, default=10.0, show_default=True)
@click.option("--step-min", type=float, default=30.0, show_default=True)
@click.option("--claim-batch", type=int, default=6, show_default=True)
@click.option("--validators", type=int, default=10, show_default=True,
              help="validators claiming attester rewards (per step, each claims its leaves in one call)")
@click.option("--challenge-rate", type=float, default=0.01, show_default=True)
@click.option("--l2-fee-gwei", type=float, default=0.01, show_default=True, help="Base L2 base + priority fee")
@click.option("--l1-base-fee-gwei", type=float, default=10.0, show_default=True)
@click.option("--blob-base-fee-gwei", type=float, default=1.0, show_default=True)
@click.option("--base-fee-scalar", type=int, default=2269, show_default=True)
@click.option("--blob-base-fee-scalar", type=int, default=1055762, show_default=True)
@click.option("--eth-usd", type=float, default=3000.0, show_default=True)
def main(workers: tuple[int, ...], submit_interval_min: float, step_min: float, claim_batch: int, validators: int,
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

    def raw_fee_usd(g: float, raw: bytes) -> float:
        return (g * l2_fee_gwei * 1e9 + l1_gas_units(raw) / 16 * l1_price / 1e6) / 1e18 * eth_usd

    print("\n### Per day at scale\n")
    print("| workers | attestations | submissions/day | tx/day | L2 gas/s | USD/day | USD per submission | "
          "of which attestations | share of Base's ~25 Mgas/s |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in workers:
        subs = n * 24 * 60 / submit_interval_min
        steps = 24 * 60 / step_min
        base = {"claimTask": subs, "submitWork": subs, "claimRewards": subs / claim_batch,
                "publishCheckpoint": steps, "challenge": subs * challenge_rate, "vote": subs * challenge_rate}
        usd0 = sum(per[k] * v for k, v in base.items())
        gas0 = sum(gas[CALLS[k].name] * v for k, v in base.items())
        tx0 = sum(base.values())
        # per submission: one record of 2 validators, each validator's claim
        att_usd = subs * (per["recordAttestations"] + 2 * per["claimAttesterReward"])
        att_gas = subs * (gas[CALLS["recordAttestations"].name] + 2 * gas[CALLS["claimAttesterReward"].name])
        rows = [("per submission", att_usd, att_gas, 3 * subs)]
        # per step: one root; each validator's leaves of the step in calls of at most 256
        step_leaves = 2 * subs / steps
        mine = step_leaves / validators
        calls = math.ceil(mine / 256)
        k = max(1, round(mine / calls))
        claim_usd = raw_fee_usd(leaf_claim_gas(gas, k), leaf_claim_bytes(k, round(step_leaves)))
        att_usd = steps * (per["recordAttestationRoot"] + validators * calls * claim_usd)
        att_gas = steps * (gas[CALLS["recordAttestationRoot"].name] + validators * calls * leaf_claim_gas(gas, k))
        rows.append((f"per step ({k} leaves a claim)", att_usd, att_gas, steps * (1 + validators * calls)))
        for label, a_usd, a_gas, a_tx in rows:
            usd, gas_s = usd0 + a_usd, (gas0 + a_gas) / 86400
            print(f"| {n:,} | {label} | {subs:,.0f} | {tx0 + a_tx:,.0f} | {gas_s:,.0f} | {usd:,.2f} | "
                  f"{usd / subs:.5f} | {a_usd / subs:.5f} | {gas_s / 25e6:.4%} |")
    print(f"\nAssumptions: a submission per worker every {submit_interval_min:g} min, a policy step every "
          f"{step_min:g} min, rewards claimed in batches of {claim_batch}, 2 used attestations a submission, "
          f"{validators} validators, {challenge_rate:.0%} of submissions "
          f"challenged (challenge + one vote; resolve not counted), L2 fee {l2_fee_gwei:g} gwei, L1 base fee "
          f"{l1_base_fee_gwei:g} gwei, blob base fee {blob_base_fee_gwei:g} gwei, scalars {base_fee_scalar}/"
          f"{blob_base_fee_scalar}, ETH {eth_usd:,.0f} USD.")


if __name__ == "__main__":
    main()
