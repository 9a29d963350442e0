"""Device and dtype of every role: config parsing, resolution against this machine, the clear CUDA error,
and the trainer's bf16 compute (fp32 master weights) running on CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from intellect.agents.cli import main
from intellect.agents.config import ConfigError, load_config
from intellect.agents.grpo_trainer import GRPOConfig, GRPOTrainer, Sample
from intellect.agents.hardware import check_role, resolve, resolve_device, resolve_dtype

NO_CUDA = not torch.cuda.is_available()


@pytest.mark.parametrize("role", ["trainer", "worker", "validator"])
def test_device_and_dtype_parse_from_flags_env_and_file(role: str, tmp_path: Path) -> None:
    cfg = load_config(None, role=role, env={}, overrides={f"{role}.device": "cuda", f"{role}.dtype": "bf16"})
    assert (getattr(cfg, role).device, getattr(cfg, role).dtype) == ("cuda", "bf16")
    cfg = load_config(None, role=role, env={f"INTELLECT_AGENT__{role.upper()}__DEVICE": "cuda:1",
                                            f"INTELLECT_AGENT__{role.upper()}__DTYPE": "bfloat16"})
    assert (getattr(cfg, role).device, getattr(cfg, role).dtype) == ("cuda:1", "bf16")  # torch's name accepted
    path = tmp_path / "c.yaml"
    path.write_text(f"role: {role}\n{role}:\n  device: cpu\n  dtype: float32\n")
    cfg = load_config(path, env={})
    assert (getattr(cfg, role).device, getattr(cfg, role).dtype) == ("cpu", "fp32")
    cfg = load_config(None, role=role, env={})
    assert (getattr(cfg, role).device, getattr(cfg, role).dtype) == ("auto", "auto")  # the defaults


@pytest.mark.parametrize(("key", "value"), [("trainer.device", "gpu"), ("worker.device", "cuda:x"),
                                            ("validator.dtype", "fp16"), ("trainer.dtype", "int8")])
def test_bad_device_or_dtype_names_the_field(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(None, role=key.split(".")[0], env={}, overrides={key: value})


def test_cpu_resolution_keeps_fp32_and_allows_bf16() -> None:
    assert resolve("cpu", "auto", "worker") == ("cpu", "float32")
    assert resolve("cpu", "fp32", "worker") == ("cpu", "float32")
    assert resolve("cpu", "bf16", "worker") == ("cpu", "bfloat16")  # a bf16 CPU worker (calibration pairs)
    assert resolve_dtype("auto", "cuda:0") == "bfloat16"  # no CUDA call for the name alone


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_auto_is_cpu_fp32_without_a_gpu() -> None:
    assert resolve("auto", "auto", "trainer") == ("cpu", "float32")
    assert check_role(load_config(None, role="relay", env={})) is None  # a relay runs no model


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:3"])
def test_cuda_without_cuda_is_a_clear_config_error(device: str) -> None:
    with pytest.raises(ConfigError, match=r"validator\.device=cuda.*CUDA is not available on this machine"):
        resolve_device(device, "validator.device")


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
@pytest.mark.parametrize("role", ["trainer", "worker", "validator"])
def test_cli_refuses_cuda_without_cuda_with_exit_2(role: str, tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["--role", role, "--set", f"{role}.device=cuda", "--set", f"{role}.dtype=bf16",
                                    "--set", f"data_dir={tmp_path}"])
    assert res.exit_code == 2, res.output
    assert f"{role}.device=cuda: CUDA is not available on this machine" in res.output
    assert "Traceback" not in res.output
    # the configuration itself is valid: --print-config shows it without touching the machine
    res = CliRunner().invoke(main, ["--role", role, "--set", f"{role}.device=cuda", "--print-config"])
    assert res.exit_code == 0 and '"device": "cuda"' in res.output


def _samples(trainer: GRPOTrainer, advantages: list[float]) -> list[Sample]:
    tok = trainer.tokenizer
    prompt = tok("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    outs = [" 5", " 6", " 55", " 4"]
    return [Sample("p0", prompt, tok(outs[i % 4], add_special_tokens=False)["input_ids"] + [tok.eos_token_id], a, 0)
            for i, a in enumerate(advantages)]


def test_trainer_bf16_autocast_keeps_fp32_master_weights(tiny_dir: Path, tmp_path: Path) -> None:
    """bf16 compute on CPU (what trainer.dtype=bf16 does on a GPU): a step trains, the weights, the optimizer
    state and the checkpoint stay fp32, and the step differs from an fp32 step only by rounding."""
    cfg = dict(lr=1e-2, async_level=1, max_completion_tokens=8, seed=1)
    bf16 = GRPOTrainer(tiny_dir, tmp_path / "bf16", GRPOConfig(autocast="bfloat16", **cfg))
    fp32 = GRPOTrainer(tiny_dir, tmp_path / "fp32", GRPOConfig(**cfg))
    adv = [1.0, -1.0, 0.5, -0.5]
    a, b = bf16.train_step(_samples(bf16, adv)), fp32.train_step(_samples(fp32, adv))
    assert a.step == b.step == 1
    assert all(p.dtype == torch.float32 for p in bf16.model.parameters())
    assert all(v.dtype == torch.float32 for st in bf16.optimizer.state.values() for v in st.values() if v.dim())
    assert a.loss == pytest.approx(b.loss, abs=0.05) and a.loss != b.loss  # bf16 rounding, not another step
    from safetensors.torch import load_file

    saved = load_file(str(bf16.checkpoint_path(1) / "model.safetensors"))
    assert all(t.dtype == torch.float32 for t in saved.values())
