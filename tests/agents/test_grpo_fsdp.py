"""Multi-process trainer: 2 gloo ranks with FSDP2 make the same update as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch

from intellect.agents.engines import SamplingParams, TransformersEngine
from intellect.agents.grpo import group_advantages
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample, latest_checkpoint
from intellect.verifier.rollouts import RolloutFile, RolloutMeta, RolloutRow

WORKER = "0x" + "cd" * 20
REWARDS = [[1.0, 0.0, 0.0], [0.0, 1.0, 1.0], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 1.0]]


def _rollout_file(tiny_dir: Path, path: Path) -> Path:
    """5 groups × 3 completions sampled from the tiny model (15 samples: the 2 mini-batches of 8
    and 7 split unevenly over 2 ranks); rewards fixed per completion so every group has signal."""
    engine = TransformersEngine(tiny_dir)
    prompts = [f"What is {a} + {a + 1}?" for a in range(len(REWARDS))]
    gens = engine.generate([p for p in prompts for _ in range(3)],
                           SamplingParams(max_tokens=12, temperature=1.0, seed=5, capture_proofs=False))
    adv = group_advantages(torch.tensor(REWARDS)).flatten().tolist()
    rewards = [r for group in REWARDS for r in group]
    rows = [RolloutRow(problem_id=f"p{i // 3}", prompt_ids=g.prompt_ids, completion_ids=g.completion_ids,
                       reward=r, task_reward=r, length_penalty=0.0, target_length=None, advantage=a,
                       policy_step=0, proofs=[], worker=WORKER)
            for i, (g, r, a) in enumerate(zip(gens, rewards, adv, strict=True))]
    meta = RolloutMeta(task_id="fsdp", seed="0x5", model=str(tiny_dir), worker=WORKER, policy_step=0, group_size=3)
    return RolloutFile(meta, rows, name="fsdp").write(path)


def _state(model_dir: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_grpo_trainer_fsdp_two_ranks_match_one_process(tiny_dir: Path, tmp_path: Path) -> None:
    rollouts = _rollout_file(tiny_dir, tmp_path / "r.rollouts")
    cfg = dict(lr=1e-3, optimizer_steps=2, max_completion_tokens=12, seed=3)

    # one process, in this one
    single = GRPOTrainer(tiny_dir, tmp_path / "single", GRPOConfig(**cfg))
    stats = single.train_step([Sample.from_row(r) for r in RolloutFile.read(rollouts)])
    assert stats.samples == 15 and stats.dropped_groups == 0

    # two gloo ranks under torchrun, sharded with fully_shard
    out = tmp_path / "fsdp"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         "-m", "intellect.agents.grpo_trainer", "--model-dir", str(tiny_dir), "--out", str(out),
         "--lr", str(cfg["lr"]), "--optimizer-steps", "2", "--max-completion-tokens", "12", "--seed", "3",
         str(rollouts)],
        capture_output=True, text=True, env=env, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 reports, rank 1 does not
    dist_stats = lines[0]
    assert dist_stats["world_size"] == 2 and dist_stats["samples"] == 15
    assert abs(dist_stats["loss"] - stats.loss) < 1e-5
    assert abs(dist_stats["grad_norm"] - stats.grad_norm) < 1e-4 * max(stats.grad_norm, 1.0)

    # one checkpoint, written once (rank 0), loadable as a plain HF model
    assert latest_checkpoint(out) == out / "step-1"
    # the checkpoint, the pointer to it, and the trainer's optimizer + RNG state (not shipped to workers)
    assert sorted(p.name for p in out.iterdir()) == ["latest", "step-1", "trainer-state"]
    assert json.loads((out / "step-1" / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    before, one, two = _state(tiny_dir), _state(single.checkpoint_path(1)), _state(out / "step-1")
    assert one.keys() == two.keys()
    upd_one = torch.cat([(one[k] - before[k]).flatten() for k in sorted(one)])
    upd_two = torch.cat([(two[k] - before[k]).flatten() for k in sorted(one)])
    assert upd_one.norm() > 1e-3  # the step changed the weights
    assert (upd_two - upd_one).norm() <= 1e-3 * upd_one.norm()
    engine = TransformersEngine(out / "step-1")
    ids = torch.tensor([[5, 9, 17, 33, 2, 40]])
    with torch.no_grad():
        torch.testing.assert_close(engine.model(input_ids=ids).logits, single.model(input_ids=ids).logits,
                                   rtol=1e-4, atol=1e-4)
