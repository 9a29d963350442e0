"""GPU figures of issue 18, measured in one run on one device (a smoke mode runs them on CPU with the tiny model).

1. Generation tokens/s of the worker's engine (`--engine transformers|vllm`) three ways: the engine's plain
   sampler without proofs (baseline: HF `generate` / vLLM's own sampler), the replayable seeded sampler
   without proofs, and the sampler with TOPLOC proof capture (what a worker runs). Overheads are against
   the baseline of the same run (INTELLECT-2 reports ≤ 1 % for proof capture).
2. Validator throughput on the same device: `verify_samples` (one batched prefill, TOPLOC, the sampler
   replay; profile `mixed`) on the completions of (1) in tokens/s, and its ratio to generation (target
   ≥ 50×; INTELLECT-2 reports up to 100×). That ratio is also how many such workers one validator on this
   device keeps up with (each worker generating at the measured rate, full time).
3. Trainer step time: `GRPOTrainer.train_step` on those completions (device, bf16 autocast when
   `--dtype bf16`), mean over `--steps` steps after one warm-up step, the checkpoint write included.

Usage:
    .venv/bin/python bench/gpu/bench_gpu.py --smoke                       # CPU, tiny model: seconds
    .venv/bin/python bench/gpu/bench_gpu.py --device cuda --dtype bf16 --model smollm2 --prompts 64 \
        --max-tokens 256 --json runs/gpu.json                             # a GPU host, transformers engine
    .venv-vllm/bin/python bench/gpu/bench_gpu.py --engine vllm --device cuda --dtype bf16 --model smollm2 \
        --prompts 256 --max-tokens 512 --json runs/gpu-vllm.json          # vLLM's CUDA wheel (.venv-vllm)
Prints one JSON object (also written to --json) with the device's name, the command and every figure.
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import torch

log = logging.getLogger("bench.gpu")


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _model_dir(model: str) -> Path:
    from intellect.agents.models import smollm2_dir, tiny_model_dir

    if model == "tiny":
        return tiny_model_dir()
    if model == "smollm2":
        return smollm2_dir()
    return Path(model)


def _engine(kind: str, device: str, dtype: str, ckpt: Path, batch: int) -> Any:
    from intellect.agents.engines import TransformersEngine, VllmEngine

    if kind == "vllm":
        eng = VllmEngine(dtype=dtype)
    else:
        eng = TransformersEngine(device=device, dtype=dtype, max_batch_size=batch)
    eng.load(ckpt)
    return eng


def _baseline(kind: str, eng: Any, prompts: list[list[int]], max_tokens: int, device: str) -> tuple[int, float]:
    """Tokens and seconds of the engine's own sampler without proofs (no replayable sampler, no capture)."""
    if kind == "vllm":
        from vllm import SamplingParams as VSamplingParams

        t0 = time.perf_counter()
        outs = eng.llm.generate([{"prompt_token_ids": p} for p in prompts],
                                VSamplingParams(temperature=1.0, max_tokens=max_tokens, seed=0), use_tqdm=False)
        return sum(len(o.outputs[0].token_ids) for o in outs), time.perf_counter() - t0
    model, tokens, seconds = eng.model, 0, 0.0
    pad = eng.tokenizer.pad_token_id if eng.tokenizer.pad_token_id is not None else 0
    for i in range(0, len(prompts), eng.max_batch_size):
        chunk = prompts[i:i + eng.max_batch_size]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)  # (B, P) left-padded
        attn = torch.zeros((len(chunk), width), dtype=torch.long)
        for j, p in enumerate(chunk):
            ids[j, width - len(p):], attn[j, width - len(p):] = torch.tensor(p), 1
        _sync(device)
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(input_ids=ids.to(eng.device), attention_mask=attn.to(eng.device), do_sample=True,
                                 max_new_tokens=max_tokens, pad_token_id=pad)
        _sync(device)
        seconds += time.perf_counter() - t0
        tokens += int((out[:, width:] != pad).sum())
    return tokens, seconds


def run(engine: str, device: str, dtype: str, model: str, prompts_n: int, max_tokens: int, steps: int,
        batch: int) -> dict[str, Any]:
    from intellect.agents.engines import SamplingParams
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
    from intellect.agents.hardware import resolve
    from intellect.agents.models import load_model
    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.replay import sample_seed
    from intellect.verifier.toploc import profile

    device, torch_dtype = resolve(device, dtype, "bench")
    ckpt = _model_dir(model)
    name = torch.cuda.get_device_name(device) if device.startswith("cuda") else f"CPU ({torch.get_num_threads()} threads)"
    out: dict[str, Any] = {"command": " ".join(sys.argv), "device": device, "device_name": name, "dtype": torch_dtype,
                           "engine": engine, "model": str(ckpt), "prompts": prompts_n, "max_tokens": max_tokens,
                           "torch": torch.__version__}
    eng = _engine(engine, device, torch_dtype, ckpt, batch)
    texts = [f"Question {i}: what is {i} + {2 * i + 1}? Think step by step, then answer." for i in range(prompts_n)]
    prompts = [eng.encode(t) if hasattr(eng, "encode") else eng.tokenizer(t, add_special_tokens=False)["input_ids"]
               for t in texts]

    # -- 1. generation, three ways (a warm-up call first: CUDA kernels, vLLM graphs) -------------------
    eng.generate(prompts[:2], SamplingParams(max_tokens=4, seed=1, capture_proofs=True))
    tok, sec = _baseline(engine, eng, prompts, max_tokens, device)
    gen: dict[str, Any] = {"baseline": {"tokens": tok, "seconds": round(sec, 4), "tokens_per_s": tok / sec}}
    gens = []
    for label, capture in (("replay_sampler", False), ("replay_sampler_and_proofs", True)):
        _sync(device)
        t0 = time.perf_counter()
        gens = eng.generate(prompts, SamplingParams(max_tokens=max_tokens, temperature=1.0, seed=7,
                                                    capture_proofs=capture))
        _sync(device)
        sec = time.perf_counter() - t0
        tok = sum(len(g.completion_ids) for g in gens)
        gen[label] = {"tokens": tok, "seconds": round(sec, 4), "tokens_per_s": tok / sec,
                      "overhead_vs_baseline": gen["baseline"]["tokens_per_s"] / (tok / sec) - 1}
    out["generation"] = gen
    samples = [(list(g.prompt_ids), list(g.completion_ids), list(g.proofs), sample_seed(7, i))
               for i, g in enumerate(gens)]
    if hasattr(eng, "close"):
        eng.close()  # the validator and the trainer take the same device next
    del eng

    # -- 2. the validator on the same device ---------------------------------------------------------
    validator = load_model(ckpt, dtype=torch_dtype, device=device).eval()
    th = profile("mixed")
    verify_samples(validator, samples[:2], th)  # warm-up
    _sync(device)
    t0 = time.perf_counter()
    results = verify_samples(validator, samples, th, temperature=1.0)
    _sync(device)
    sec = time.perf_counter() - t0
    tok = sum(len(s[1]) for s in samples)
    gen_tps = gen["replay_sampler_and_proofs"]["tokens_per_s"]
    out["validation"] = {"tokens": tok, "seconds": round(sec, 4), "tokens_per_s": tok / sec,
                         "accepted": sum(r.ok for r in results), "samples": len(results),
                         "ratio_to_generation": (tok / sec) / gen_tps,
                         "workers_one_validator_keeps_up_with": (tok / sec) / gen_tps}
    del validator

    # -- 3. trainer steps ------------------------------------------------------------------------------
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        trainer = GRPOTrainer(ckpt, tmp, GRPOConfig(
            device=device, autocast=None if torch_dtype == "float32" else torch_dtype, lr=1e-6, optimizer_steps=1,
            max_completion_tokens=max_tokens, async_level=1, keep_checkpoints=1, filter_zero_advantage=False))
        times = []
        for k in range(steps + 1):
            batch_samples = [Sample(f"p{i // 4}", s[0], s[1] or [0], 1.0 if i % 2 else -1.0, trainer.step)
                             for i, s in enumerate(samples)]
            _sync(device)
            t0 = time.perf_counter()
            trainer.train_step(batch_samples)
            _sync(device)
            if k:  # the first step warms up (allocator, kernels)
                times.append(time.perf_counter() - t0)
        out["trainer"] = {"steps": len(times), "samples_per_step": len(samples),
                          "tokens_per_step": sum(len(s[1]) for s in samples),
                          "seconds_per_step": sum(times) / max(len(times), 1),
                          "compute": torch_dtype if torch_dtype != "float32" else "float32"}
    return out


@click.command()
@click.option("--engine", type=click.Choice(["transformers", "vllm"]), default="transformers", show_default=True)
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N")
@click.option("--dtype", default="auto", show_default=True, help="auto (bf16 on CUDA, fp32 on CPU), fp32, bf16")
@click.option("--model", default="tiny", show_default=True, help="tiny, smollm2 or an HF model directory")
@click.option("--prompts", "prompts_n", default=32, show_default=True, help="completions per generation call")
@click.option("--max-tokens", default=128, show_default=True)
@click.option("--steps", default=3, show_default=True, help="trainer steps timed (after one warm-up step)")
@click.option("--batch", default=64, show_default=True, help="transformers engine's max batch size")
@click.option("--smoke", is_flag=True, help="CPU, tiny model, 4 prompts × 8 tokens, 1 trainer step: checks the code")
@click.option("--json", "json_path", type=click.Path(path_type=Path), default=None)
def main(engine: str, device: str, dtype: str, model: str, prompts_n: int, max_tokens: int, steps: int, batch: int,
         smoke: bool, json_path: Path | None) -> None:
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if smoke:
        device, model, prompts_n, max_tokens, steps, batch = "cpu", "tiny", 4, 8, 1, 4
    out = run(engine, device, dtype, model, prompts_n, max_tokens, steps, batch)
    text = json.dumps(out, indent=2)
    click.echo(text)
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(text)


if __name__ == "__main__":
    main()
