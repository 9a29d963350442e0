"""Device and dtype of a role: the config's names, resolved against this machine at start.

    device: auto | cpu | cuda | cuda:N      (auto: cuda if torch sees a GPU, else cpu)
    dtype:  auto | fp32 | bf16              (auto: bf16 on cuda, fp32 on cpu; float32/bfloat16 accepted)

`resolve(cfg_device, cfg_dtype, key)` turns them into what torch takes ("cuda:0", "bfloat16").
Asking for CUDA on a machine without it is a `ConfigError` at start, naming the key and what torch
sees, instead of a traceback from deep inside torch at the first `.to("cuda")`. The config itself
imports no torch: only `resolve` does, and only for roles that run a model.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NamedTuple

from pydantic import BeforeValidator, Field

from intellect.sdk import ConfigError

__all__ = ["DEVICE_PATTERN", "TORCH_DTYPE", "DTypeName", "DeviceName", "Placement", "check_role", "resolve", "resolve_device",
           "resolve_dtype"]

DEVICE_PATTERN = r"^(auto|cpu|cuda(:[0-9]+)?)$"
_DTYPE_ALIASES = {"float32": "fp32", "bfloat16": "bf16", "torch.float32": "fp32", "torch.bfloat16": "bf16"}
TORCH_DTYPE = {"fp32": "float32", "bf16": "bfloat16"}


def _dtype_alias(value: Any) -> Any:
    return _DTYPE_ALIASES.get(value.strip().lower(), value.strip().lower()) if isinstance(value, str) else value


DeviceName = Annotated[str, Field(pattern=DEVICE_PATTERN)]
"""`auto`, `cpu`, `cuda` or `cuda:N`."""
DTypeName = Annotated[Literal["auto", "fp32", "bf16"], BeforeValidator(_dtype_alias)]
"""`auto`, `fp32` (float32) or `bf16` (bfloat16)."""


class Placement(NamedTuple):
    """Where a role's model runs: a torch device string and a torch dtype name."""

    device: str
    """`cpu` or `cuda:N`"""
    dtype: str
    """`float32` or `bfloat16` (`getattr(torch, dtype)`)"""


def _cuda_state() -> tuple[bool, int, str]:
    import torch

    built = torch.version.cuda
    available = torch.cuda.is_available()
    count = torch.cuda.device_count() if available else 0
    what = (f"torch {torch.__version__} is built without CUDA" if built is None
            else f"torch {torch.__version__} (CUDA {built}) sees {count} GPU(s)")
    return available, count, what


def resolve_device(requested: str, key: str = "device") -> str:
    """`auto` → `cuda:0` if a GPU is visible, else `cpu`; `cuda`/`cuda:N` checked against the machine."""
    requested = requested.strip().lower()
    if requested == "cpu":
        return "cpu"
    available, count, what = _cuda_state()
    if requested == "auto":
        return "cuda:0" if available else "cpu"
    if not requested.startswith("cuda"):
        raise ConfigError(f"{key}={requested!r}: not a device (auto, cpu, cuda or cuda:N)")
    index = int(requested.split(":", 1)[1]) if ":" in requested else 0
    if not available:
        raise ConfigError(f"{key}={requested}: CUDA is not available on this machine ({what}); "
                          f"set {key}=cpu (or auto), or install torch's CUDA build on a GPU host")
    if index >= count:
        raise ConfigError(f"{key}={requested}: this machine has {count} GPU(s) (cuda:0..cuda:{count - 1})")
    return f"cuda:{index}"


def resolve_dtype(requested: str, device: str, key: str = "dtype") -> str:
    """`auto` → bfloat16 on CUDA, float32 on CPU; `fp32`/`bf16` as asked (bf16 on CPU is allowed: slow
    on most CPUs, but it is what a bf16 worker computes, and calibrations need it)."""
    requested = _dtype_alias(requested)
    if requested == "auto":
        return "bfloat16" if device.startswith("cuda") else "float32"
    if requested not in TORCH_DTYPE:
        raise ConfigError(f"{key}={requested!r}: not a dtype (auto, fp32 or bf16)")
    if requested == "bf16" and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_bf16_supported():
            raise ConfigError(f"{key}=bf16: {torch.cuda.get_device_name(device)} has no bfloat16 support; "
                              f"set {key}=fp32")
    return TORCH_DTYPE[requested]


def resolve(device: str, dtype: str, section: str) -> Placement:
    """The placement of config section `section` (`worker`, `validator`, `trainer`)."""
    dev = resolve_device(device, f"{section}.device")
    return Placement(dev, resolve_dtype(dtype, dev, f"{section}.dtype"))


def check_role(cfg: Any) -> Placement | None:
    """Resolve the placement of `cfg.role`'s model (None for a role without one, the relay): raises
    `ConfigError` before the agent starts when the machine cannot give what the config asks."""
    section = str(getattr(cfg.role, "value", cfg.role))
    settings = getattr(cfg, section, None)
    if settings is None or not hasattr(settings, "device"):
        return None
    return resolve(settings.device, settings.dtype, section)
