"""Checkpoint deltas on a real model: bytes per step, encode/decode time, Shardcast time full vs delta.

    HF_HUB_OFFLINE=1 nice -n 10 .venv/bin/python bench/shardcast/delta.py [--lr 1e-6 --lr 2e-5]

Per learning rate: the model (SmolLM2-135M from the verifier's cache when it is there, else the
tests' tiny Llama) takes `--steps` policy steps of `--updates` AdamW updates each (the pool's
optimizer: betas 0.9/0.99, weight decay 0.01, gradient-norm clip 0.1; the loss is the causal-LM
loss of a fixed small batch, not GRPO's, which needs rollouts), and each step is saved in bf16 as
the trainer publishes it. For each consecutive pair (t−1, t) it reports, as % of the full
checkpoint:

- `xor+zstd3`: the XOR of the two files, zstd level 3 (the issue's first baseline);
- `xor planes zstd19`: the XOR's two byte planes, each zstd level 19 (the issue's second);
- `ckdelta/v1`: this repository's encoding (`intellect.sdk.shardcast._delta`), with its encode and
  decode seconds;

and the Shardcast time of one client fetching step t from an origin over loopback HTTP, the full
checkpoint vs the delta against its local step t−1 (rebuild and sha256 checks included), in the
same run: the ratio is the figure (absolute seconds depend on the machine's load).
`--ckpts DIR` reuses checkpoints saved by an earlier run (DIR/lr<lr>/step-<n>/).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import struct
import tempfile
import time
from pathlib import Path

import numpy as np

from intellect.sdk.shardcast import (
    Client,
    Origin,
    decode_to_memory,
    encode_delta,
    zstd_compress,
    zstd_version,
)

TEXTS = ["The quick brown fox jumps over the lazy dog. " * 8, "def add(a, b):\n    return a + b\n" * 6,
         "Question: what is 17 * 23? Answer: 391. " * 6, "In 1492 Columbus sailed the ocean blue. " * 7]


def model_dir() -> tuple[Path, str]:
    from intellect.verifier.models import cache_root

    smol = cache_root() / "models" / "smollm2-135m"
    if (smol / "config.json").is_file() and any(smol.glob("*.safetensors")):
        return smol, "SmolLM2-135M-Instruct"
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "shardcast"))
    from shardcast_helpers import write_tiny_hf_checkpoint

    d = Path(tempfile.mkdtemp(prefix="delta-tiny-"))
    return write_tiny_hf_checkpoint(d / "tiny"), "tiny Llama (SmolLM2 not cached)"


def make_steps(src: Path, out: Path, lr: float, steps: int, updates: int) -> list[Path]:
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if all((out / f"step-{s}" / "model.safetensors").is_file() for s in range(steps + 1)):
        return [out / f"step-{s}" for s in range(steps + 1)]
    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(src)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    batch = tok(TEXTS, return_tensors="pt", padding=True, truncation=True, max_length=64)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.99), weight_decay=0.01)

    def save(step: int) -> Path:
        d = out / f"step-{step}"
        d.mkdir(parents=True, exist_ok=True)
        sd = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
        save_file(sd, str(d / "model.safetensors"), metadata={"format": "pt"})
        for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
            if (src / f).is_file():
                shutil.copy(src / f, d / f)
        return d

    dirs = [save(0)]
    for step in range(1, steps + 1):
        for _ in range(updates):
            loss = model(**batch, labels=batch["input_ids"]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
            opt.zero_grad()
        dirs.append(save(step))
    return dirs


def files(d: Path) -> list[tuple[str, bytes]]:
    return [(p.relative_to(d).as_posix(), p.read_bytes()) for p in sorted(d.rglob("*")) if p.is_file()]


def baselines(a: bytes, b: bytes, full: int, level: int) -> dict[str, float]:
    (n,) = struct.unpack("<Q", a[:8])
    x = np.frombuffer(a, np.uint16, offset=8 + n) ^ np.frombuffer(b, np.uint16, offset=8 + n)
    changed = float(np.mean(x != 0))
    t0 = time.perf_counter()
    xz3 = len(zstd_compress(x.tobytes(), 3))
    t_xz3 = time.perf_counter() - t0
    planes = x.view(np.uint8).reshape(-1, 2)
    t0 = time.perf_counter()
    xp19 = sum(len(zstd_compress(np.ascontiguousarray(planes[:, k]), level)) for k in range(2))
    t_xp19 = time.perf_counter() - t0
    return {"changed_pct": 100 * changed, "xor_zstd3_pct": 100 * xz3 / full, "xor_zstd3_s": t_xz3,
            "xor_planes_zstd19_pct": 100 * xp19 / full, "xor_planes_zstd19_s": t_xp19}


def decode_timed(payload: bytes, base: dict[str, bytes], cur: list[tuple[str, bytes]],
                 threads: int) -> tuple[float, dict[str, bytes]]:
    expected = [(p, len(d), hashlib.sha256(d).hexdigest()) for p, d in cur]
    t0 = time.perf_counter()
    out = decode_to_memory(payload, base, expected, base_manifest_id="0" * 64, threads=threads)
    return time.perf_counter() - t0, out


def shardcast_times(prev: Path, cur: Path, work: Path, repeat: int, level: int,
                    link_mbit: float | None) -> dict[str, float]:
    """Publish prev and cur from an origin; time a client fetching cur in full and as a delta.
    link_mbit: cap the origin's sending at this many Mbit/s per client (its 4 download threads
    share it: each response is capped at a quarter), as a network link between them would."""
    rate = int(link_mbit * 1e6 / 8 / 4) if link_mbit else None
    origin = Origin(work / "origin", shard_size=50_000_000, delta_level=level, max_rate=rate).start()
    try:
        origin.publish(prev, step=1, model_name="bench")
        t0 = time.perf_counter()
        m, _ = origin.publish(cur, step=2, model_name="bench")
        publish_s = time.perf_counter() - t0
        assert m.delta is not None, "no delta was published"
        full, delta = [], []
        for i in range(repeat):
            for kind in ("full", "delta"):
                out = work / f"{kind}-{i}"
                c = Client([origin.url], fsync=False)
                t0 = time.perf_counter()
                res = c.fetch_detailed(m, out, base=prev if kind == "delta" else None)
                (delta if kind == "delta" else full).append(time.perf_counter() - t0)
                assert res.delta == (kind == "delta"), res.delta_error
                shutil.rmtree(out)
        return {"publish_with_delta_s": publish_s, "fetch_full_s": statistics.median(full),
                "fetch_delta_s": statistics.median(delta), "delta_bytes": m.delta.size, "full_bytes": m.total_size}
    finally:
        origin.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lr", type=float, action="append", help="learning rate (repeat); default 1e-6 and 2e-5")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--updates", type=int, default=2, help="AdamW updates per policy step (trainer default 2)")
    ap.add_argument("--level", type=int, default=3, help="zstd level of ckdelta/v1 (the Origin's default: 3)")
    ap.add_argument("--baseline-level", type=int, default=19, help="zstd level of the XOR-planes baseline")
    ap.add_argument("--pair", type=int, action="append",
                    help="only the pair (t-1, t) for these t (repeat); default every pair")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="Shardcast fetches of each kind (median)")
    ap.add_argument("--ckpts", type=Path, default=None, help="where checkpoints are saved / reused")
    ap.add_argument("--json", type=Path, default=None, help="write the results here too")
    ap.add_argument("--link-mbit", type=float, default=None,
                    help="cap the origin at this many Mbit/s per client (default: loopback, uncapped)")
    a = ap.parse_args()
    src, name = model_dir()
    ckpts = a.ckpts or Path(tempfile.mkdtemp(prefix="delta-ckpts-"))
    load = os.getloadavg()
    print(f"model: {name} ({src}); zstd {zstd_version()}; load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
          f"link {a.link_mbit or 'loopback'} Mbit/s")
    rows = []
    for lr in a.lr or [1e-6, 2e-5]:
        dirs = make_steps(src, ckpts / f"lr{lr:g}", lr, a.steps, a.updates)
        for t in a.pair or range(1, len(dirs)):
            prev, cur = files(dirs[t - 1]), files(dirs[t])
            full = sum(len(d) for _, d in cur)
            row: dict[str, float | str] = {"lr": f"{lr:g}", "step": f"{t - 1}->{t}", "full_bytes": full}
            row.update(baselines(dict(prev)["model.safetensors"], dict(cur)["model.safetensors"], full,
                                 a.baseline_level))
            c0 = time.process_time()
            payload, st = encode_delta(dict(prev), cur, base_manifest_id="0" * 64, level=a.level, threads=a.threads)
            enc_cpu = time.process_time() - c0
            c0 = time.process_time()
            dec, rebuilt = decode_timed(payload, dict(prev), cur, a.threads)
            dec_cpu = time.process_time() - c0
            assert rebuilt == dict(cur), "delta did not rebuild the checkpoint"
            row.update({"ckdelta_pct": 100 * len(payload) / full, "encode_s": st.seconds, "decode_s": dec,
                        "encode_cpu_s": enc_cpu, "decode_cpu_s": dec_cpu,
                        "streams": json.dumps(st.per_stream)})
            work = Path(tempfile.mkdtemp(prefix="delta-sc-"))
            try:
                row.update(shardcast_times(dirs[t - 1], dirs[t], work, a.repeat, a.level, a.link_mbit))
            finally:
                shutil.rmtree(work, ignore_errors=True)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print()
    print(f"| lr | step | changed | xor+zstd3 | xor planes zstd{a.baseline_level} | ckdelta/v1 (zstd {a.level}) | "
          "encode s (CPU s) | decode s (CPU s) | fetch full s | fetch delta s | full / delta |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['lr']} | {r['step']} | {r['changed_pct']:.1f} % | {r['xor_zstd3_pct']:.2f} % | "
              f"{r['xor_planes_zstd19_pct']:.2f} % | **{r['ckdelta_pct']:.2f} %** | {r['encode_s']:.1f} "
              f"({r['encode_cpu_s']:.1f}) | {r['decode_s']:.1f} ({r['decode_cpu_s']:.1f}) | {r['fetch_full_s']:.2f} | "
              f"{r['fetch_delta_s']:.2f} | {r['fetch_full_s'] / r['fetch_delta_s']:.1f}× |")
    load = os.getloadavg()
    print(f"load at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
