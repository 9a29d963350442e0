"""The trainer role's rank protocol (issue 38, `intellect.agents.roles.trainer_ranks`): under torchrun, rank 0 (the
agent) opens the policy and sends each batch; rank 1 follows. Two gloo ranks make the same checkpoints as one
process for the same batches, through a batch every rank refuses (no signal) and a restart from the checkpoint
(each rank's optimizer and RNG state from its own file)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_grpo_fsdp import _rollout_file, _state  # type: ignore[import-not-found]

from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, NoSignalError, Sample, latest_checkpoint
from intellect.verifier.rollouts import RolloutFile

RECIPE = dict(lr=1e-3, optimizer_steps=2, max_completion_tokens=12, seed=3)

DRIVER = '''
import dataclasses, json, logging, sys
from pathlib import Path
from intellect.agents.grpo_trainer import GRPOConfig, NoSignalError, Sample, latest_checkpoint
from intellect.agents.roles import trainer_ranks as ranks
from intellect.verifier.rollouts import RolloutFile

model, out, rollouts, recipe = sys.argv[1], Path(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
rank, world, device = ranks.join("cpu")
if rank > 0:
    sys.exit(ranks.follow())
try:
    local = latest_checkpoint(out)
    gt = ranks.lead_open(Path(local or model), out, GRPOConfig(**recipe), fresh=local is None)
    samples = [Sample.from_row(r) for r in RolloutFile.read(rollouts)]
    try:  # every group flat: refused before any collective, on every rank alike
        gt.train_step([dataclasses.replace(s, advantage=0.0) for s in samples])
    except NoSignalError:
        print("refused", flush=True)
    st = gt.train_step(samples)
    print(json.dumps({"step": st.step, "loss": st.loss, "world": world}), flush=True)
finally:
    ranks.release()
'''


def _ranks(driver: Path, tiny_dir: Path, out: Path, rollouts: Path) -> tuple[dict, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(driver),
         str(tiny_dir), str(out), str(rollouts), json.dumps(RECIPE)],
        capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = proc.stdout.splitlines()
    assert lines.count("refused") == 1, proc.stdout  # rank 0 saw the refusal; rank 1 logged it and followed
    (doc,) = [json.loads(x) for x in lines if x.startswith("{")]
    return doc, proc.stderr


def _single_step(gt: GRPOTrainer, samples: list[Sample]) -> float:
    with pytest.raises(NoSignalError):  # as the ranks refused it
        gt.train_step([dataclasses.replace(s, advantage=0.0) for s in samples])
    return gt.train_step(samples).loss


def _close(a: Path, b: Path, before: dict[str, torch.Tensor]) -> None:
    """The two checkpoints' updates agree to 1e-3 of the update's norm: FSDP2 reduces gradients over the ranks in
    another order than one process sums them (float32 sums are not associative), so the bytes may differ."""
    one, two = _state(a), _state(b)
    assert one.keys() == two.keys()
    upd_one = torch.cat([(one[k] - before[k]).flatten() for k in sorted(one)])
    upd_two = torch.cat([(two[k] - before[k]).flatten() for k in sorted(one)])
    assert upd_one.norm() > 1e-3
    assert (upd_two - upd_one).norm() <= 1e-3 * upd_one.norm()


def test_two_ranks_follow_rank_zero_like_one_process(tiny_dir: Path, tmp_path: Path) -> None:
    rollouts = _rollout_file(tiny_dir, tmp_path / "r.rollouts")
    samples = [Sample.from_row(r) for r in RolloutFile.read(rollouts)]
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    out = tmp_path / "ranks"

    # first launch: step 0 written from the base model (every rank saves: a collective), a refused batch, step 1
    doc, _ = _ranks(driver, tiny_dir, out, rollouts)
    assert doc["world"] == 2 and doc["step"] == 1
    single = GRPOTrainer(tiny_dir, tmp_path / "single", GRPOConfig(**RECIPE))
    single.save_checkpoint()
    loss = _single_step(single, samples)
    assert abs(doc["loss"] - loss) < 1e-5
    assert sorted(p.name for p in (out / "trainer-state").iterdir()) == [
        "step-0-rank0.pt", "step-0-rank1.pt", "step-1-rank0.pt", "step-1-rank1.pt"]
    _close(single.checkpoint_path(1), out / "step-1", _state(tiny_dir))

    # second launch (as after kill -9 and torchrun's restart): every rank resumes step 1 with its own state
    doc, err = _ranks(driver, tiny_dir, out, rollouts)
    assert doc["step"] == 2 and latest_checkpoint(out) == out / "step-2"
    assert err.count("resumed optimizer and RNG state of step 1 (2 updates)") == 2, err[-3000:]  # each rank its own
    assert "rank 1: step 2 refused on every rank" in err and "rank 1: rank 0 stopped; leaving" in err
    loss = _single_step(single, samples)
    assert abs(doc["loss"] - loss) < 1e-5
    _close(single.checkpoint_path(2), out / "step-2", _state(single.checkpoint_path(1)))
