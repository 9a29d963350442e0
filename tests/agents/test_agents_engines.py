"""TransformersEngine: batching, stop conditions, TOPLOC capture, checkpoint load and hot swap."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from intellect.agents.engines import EngineError, InferenceEngine, SamplingParams, TransformersEngine
from intellect.agents.grpo import StaleRolloutError
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, NoSignalError, Sample, latest_checkpoint

PROMPTS = ["What is 2 + 3?", "Ada has 5 apples. Ada gets 3 more apples. How many apples does Ada have now?", "Hi"]


@pytest.fixture(scope="module")
def engine(tiny_dir: Path) -> TransformersEngine:
    return TransformersEngine(tiny_dir)


def _samples(trainer: GRPOTrainer, step: int, advantages: list[float]) -> list[Sample]:
    tok = trainer.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    outs = [" 5", " 6", " 55", " 4"]
    return [
        Sample("p0", prompt, tok(outs[i % 4], add_special_tokens=False)["input_ids"] + [tok.eos_token_id], a, step)
        for i, a in enumerate(advantages)
    ]


def test_engine_satisfies_protocol(engine: TransformersEngine) -> None:
    assert isinstance(engine, InferenceEngine)


def test_generate_batched_matches_single_greedy(engine: TransformersEngine) -> None:
    params = SamplingParams(max_tokens=12, temperature=0.0, capture_proofs=False)
    batched = engine.generate(PROMPTS, params)
    for prompt, gen in zip(PROMPTS, batched, strict=True):
        (single,) = engine.generate([prompt], params)
        assert single.completion_ids == gen.completion_ids  # left padding changes nothing


def test_generate_seeded_sampling_reproducible(engine: TransformersEngine) -> None:
    params = SamplingParams(max_tokens=10, temperature=1.0, top_p=0.9, top_k=50, seed=7, capture_proofs=False)
    a = engine.generate(PROMPTS, params)
    b = engine.generate(PROMPTS, params)
    assert [g.completion_ids for g in a] == [g.completion_ids for g in b]
    assert all(g.logprobs is not None and len(g.logprobs) == len(g.completion_ids) for g in a)


def test_generate_stop_conditions(engine: TransformersEngine) -> None:
    gens = engine.generate(PROMPTS, SamplingParams(max_tokens=5, temperature=1.0, seed=1, capture_proofs=False))
    for g in gens:
        assert len(g.completion_ids) <= 5
        assert (g.finish_reason == "length") == (len(g.completion_ids) == 5 and g.completion_ids[-1] != 0)
    # a stop string found in the text ends generation and is cut from the text
    long = engine.generate(["What is"], SamplingParams(max_tokens=30, temperature=0.0, capture_proofs=False))[0]
    stop_char = long.text.strip()[:1]
    assert stop_char, "the tiny model produced no text to stop on"
    stopped = engine.generate(["What is"], SamplingParams(max_tokens=30, temperature=0.0, stop=(stop_char,),
                                                         capture_proofs=False))[0]
    assert stopped.finish_reason == "stop"
    assert stop_char not in stopped.text
    assert len(stopped.completion_ids) <= len(long.completion_ids)


def test_generate_proofs_verify_against_prefill(engine: TransformersEngine, tiny_dir: Path) -> None:
    from intellect.verifier.toploc import verify_proofs

    gens = engine.generate(PROMPTS[:2], SamplingParams(max_tokens=40, temperature=1.0, seed=3))
    model = engine.model
    for g in gens:
        n = len(g.completion_ids)
        assert len(g.proofs) == (n + 31) // 32
        ids = torch.tensor([g.prompt_ids + g.completion_ids])
        with torch.no_grad():
            hidden = model.model(input_ids=ids).last_hidden_state[0]  # (P + T, H), one prefill pass
        p = len(g.prompt_ids)
        rows = hidden[p - 1 : p - 1 + n]  # row i produced completion token i
        assert verify_proofs(rows, g.proofs).ok
        # another model's states (re-initialised weights) must not pass
        other = torch.randn_like(rows)
        assert not verify_proofs(other, g.proofs).ok


def test_engine_load_bad_dir_raises(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"no config\.json"):
        TransformersEngine(tmp_path)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(EngineError, match=r"unreadable config\.json"):
        TransformersEngine(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(EngineError, match=r"config\.json is not a JSON object"):
        TransformersEngine(tmp_path)
    with pytest.raises(EngineError, match="no checkpoint loaded"):
        TransformersEngine().generate(["x"], SamplingParams())


def test_checkpoint_round_trip_identical_logits_and_hot_swap(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, async_level=1, max_completion_tokens=8))
    step0 = trainer.save_checkpoint()
    engine = TransformersEngine(step0)
    model_obj = engine.model
    stats = trainer.train_step(_samples(trainer, 0, [1.0, -1.0, 0.5, -0.5]))
    assert stats.step == 1 and latest_checkpoint(tmp_path / "ckpt") == trainer.checkpoint_path(1)
    ids = torch.tensor([[5, 9, 17, 33, 2, 40]])
    with torch.no_grad():
        before = engine.model(input_ids=ids).logits
        engine.load(trainer.checkpoint_path(1))  # hot swap: same process, same module
        assert engine.model is model_obj and engine.policy_step == 1
        swapped = engine.model(input_ids=ids).logits
        trained = trainer.model(input_ids=ids).logits
    assert not torch.equal(before, swapped)
    assert torch.equal(swapped, trained)
    fresh = TransformersEngine(trainer.checkpoint_path(1))  # and a cold load gives the same
    with torch.no_grad():
        assert torch.equal(fresh.model(input_ids=ids).logits, trained)


def test_load_weights_takes_a_live_modules_state_as_its_checkpoint_would(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, async_level=1, max_completion_tokens=8))
    trainer.save_checkpoint()
    trainer.train_step(_samples(trainer, 0, [1.0, -1.0, 0.5, -0.5]))
    from_disk, in_memory = TransformersEngine(trainer.checkpoint_path(1)), TransformersEngine(tiny_dir)
    with pytest.raises(EngineError, match="no checkpoint loaded"):
        TransformersEngine().load_weights(trainer.model.state_dict())
    model_obj = in_memory.model
    in_memory.load_weights(trainer.model.state_dict(), policy_step=1)
    assert in_memory.model is model_obj and in_memory.policy_step == 1 and in_memory.checkpoint_dir is None
    params = SamplingParams(max_tokens=8, temperature=1.0, seed=5, capture_proofs=False)
    assert [g.completion_ids for g in in_memory.generate(PROMPTS, params)] == \
        [g.completion_ids for g in from_disk.generate(PROMPTS, params)]
    state = dict(trainer.model.state_dict())
    state.pop("model.norm.weight")
    with pytest.raises(EngineError, match="does not match the loaded architecture"):
        in_memory.load_weights(state)


def test_train_step_refuses_stale_rollouts(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(async_level=0, max_completion_tokens=8))
    trainer.train_step(_samples(trainer, 0, [1.0, -1.0]))
    with pytest.raises(StaleRolloutError, match="policy step 0 is too stale for training step 1"):
        trainer.train_step(_samples(trainer, 0, [1.0, -1.0]))


def test_train_step_zero_advantage_groups_dropped(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=1e-2, max_completion_tokens=8))
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    with pytest.raises(NoSignalError, match="zero advantage"):  # no step, no checkpoint identical to step 0
        trainer.train_step(_samples(trainer, 0, [0.0, 0.0, 0.0, 0.0]))
    assert trainer.step == 0 and not trainer.checkpoint_path(1).exists()
    after = trainer.model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_train_step_moves_probability_toward_positive_advantage(tiny_dir: Path, tmp_path: Path) -> None:
    trainer = GRPOTrainer(tiny_dir, tmp_path / "ckpt", GRPOConfig(lr=3e-3, optimizer_steps=1, max_completion_tokens=8))
    samples = _samples(trainer, 0, [1.0, -1.0])  # " 5" good, " 6" bad
    lp0 = [sum(x) for x in trainer.logprobs(samples)]
    for _ in range(3):
        trainer.train_step([Sample(s.problem_id, s.prompt_ids, s.completion_ids, s.advantage, trainer.step)
                            for s in samples])
    lp1 = [sum(x) for x in trainer.logprobs(samples)]
    assert lp1[0] > lp0[0] and lp1[1] < lp0[1]


def test_generate_replayable_by_validator_across_batches(tiny_dir: Path) -> None:
    """Completion i of a call samples with sample_seed(seed, i) whatever batch it lands in: a validator replays it."""
    from intellect.verifier.prefill import verify_samples
    from intellect.verifier.replay import sample_seed

    params = SamplingParams(max_tokens=24, temperature=0.9, top_k=40, seed=21)
    small = TransformersEngine(tiny_dir, max_batch_size=2)
    gens = small.generate(PROMPTS, params)
    assert [g.completion_ids for g in gens] == [g.completion_ids for g in TransformersEngine(tiny_dir).generate(
        PROMPTS, params)]
    samples = [(g.prompt_ids, g.completion_ids, g.proofs, sample_seed(21, i)) for i, g in enumerate(gens)]
    results = verify_samples(small.model, samples, temperature=0.9, top_k=40)
    assert all(r.ok and r.replay is not None and r.replay.flips == 0 for r in results), [r.detail for r in results]
    swapped = [(p, c, pr, sample_seed(21, (i + 1) % 3)) for i, (p, c, pr, _) in enumerate(samples)]
    assert sum(r.replay.flips for r in verify_samples(small.model, swapped, temperature=0.9, top_k=40)) > 0
