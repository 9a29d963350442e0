"""Resume after `kill -9`: optimizer and RNG state are saved with every checkpoint, so a trainer killed
right after writing step 1 and restarted from its newest checkpoint writes the same step 3, byte for
byte, as a trainer that never stopped (issue 17). Without the saved state it does not (the control)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r"""
import os, signal, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample, latest_checkpoint

model, out, kill_at, last = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
cfg = GRPOConfig(lr=1e-2, optimizer_steps=2, max_completion_tokens=8, warmup_steps=4, seed=7,
                 filter_zero_advantage=True)
resume = latest_checkpoint(out)
t = GRPOTrainer(resume or model, out, cfg)
if resume is None:
    t.save_checkpoint()
tok = t.tokenizer

def batch(step):
    out = []
    for g, (q, outs) in enumerate([("What is 2 + 3?", [" 5", " 6", " 4", " 55"]),
                                   ("What is 7 + 1?", [" 8", " 9", " 7", " 88"]),
                                   ("What is 4 + 4?", [" 8", " 44", " 0", " 9"])]):
        prompt = tok(q, add_special_tokens=False)["input_ids"]
        for i, o in enumerate(outs):
            adv = [1.2, -0.4, -0.4, -0.4][(i + step + g) % 4]
            out.append(Sample(f"p{g}", prompt, tok(o, add_special_tokens=False)["input_ids"] + [tok.eos_token_id],
                              adv, step))
    return out

while t.step < last:
    t.train_step(batch(t.step))
    if t.step == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
"""


def _run(tiny_dir: Path, out: Path, kill_at: int, last: int = 3) -> int:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tiny_dir), str(out), str(kill_at), str(last)],
                          env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode not in (0, -signal.SIGKILL):
        raise AssertionError(proc.stderr[-3000:])
    return proc.returncode


def _weights(out: Path, step: int) -> bytes:
    return (out / f"step-{step}" / "model.safetensors").read_bytes()


def test_kill_9_and_restart_is_bit_exact(tiny_dir: Path, tmp_path: Path) -> None:
    straight, killed, control = tmp_path / "straight", tmp_path / "killed", tmp_path / "control"
    assert _run(tiny_dir, straight, kill_at=-1) == 0

    assert _run(tiny_dir, killed, kill_at=1) == -signal.SIGKILL  # killed right after writing step 1
    assert (killed / "latest").read_text() == "1" and not (killed / "step-2").exists()
    assert (killed / "trainer-state" / "step-1-rank0.pt").is_file()
    shutil.copytree(killed, control)
    assert _run(tiny_dir, killed, kill_at=-1) == 0  # restarted: resumes step 1's optimizer and RNG state

    assert _weights(killed, 1) == _weights(straight, 1)
    assert _weights(killed, 3) == _weights(straight, 3)
    assert not (killed / "step-3" / "trainer-state").exists()  # the state never travels with the checkpoint

    # the control: the same restart without the saved state (fresh AdamW, reseeded shuffle) diverges
    (control / "trainer-state" / "step-1-rank0.pt").unlink()
    assert _run(tiny_dir, control, kill_at=-1) == 0
    assert _weights(control, 3) != _weights(straight, 3)


def test_warmup_raises_lr_linearly(tiny_dir: Path, tmp_path: Path) -> None:
    from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer

    t = GRPOTrainer(tiny_dir, tmp_path / "o", GRPOConfig(lr=1e-3, warmup_steps=4))
    seen = []
    for u in range(6):
        t.updates = u
        seen.append(t._lr())
    assert seen == pytest.approx([2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3])
    assert GRPOTrainer(tiny_dir, tmp_path / "p", GRPOConfig(lr=1e-3))._lr() == 1e-3
