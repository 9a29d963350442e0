"""Models the agents run: any HF causal-LM directory, a tiny config-built model, SmolLM2-135M.

- `load_model(dir)` / `load_tokenizer(dir)`: any directory `AutoModelForCausalLM` can read
  (the trainer's checkpoints are such directories: safetensors + config + tokenizer).
- `tiny_model_dir(...)`: a small Llama (hidden 128, 2 layers by default) built from a config,
  with a byte-level BPE tokenizer trained locally (`tokenizers`) on synthetic task text. Digits
  are split one per token so that arithmetic is learnable by a model this small. Built once and
  cached under `cache_dir()`; the build is deterministic for a given spec (seeded init).
- `smollm2_dir()`: the real SmolLM2-135M-Instruct (offline, via the verifier's helper).

Why a tiny Llama: a GRPO step on 16 × 128 tokens costs ~0.1 s on 2 CPU cores at hidden 128
(TOOLCHAIN.md), which is what lets a test *learn* in under a minute.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from intellect.agents.tasks import synthetic_task_set
from intellect.verifier.models import smollm2_path

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

__all__ = [
    "EOS_TOKEN",
    "TinyModelSpec",
    "build_cached",
    "build_tiny_model",
    "cache_dir",
    "load_model",
    "load_tokenizer",
    "smollm2_dir",
    "tiny_model_dir",
    "train_tokenizer",
]

EOS_TOKEN = "<|endoftext|>"
PAD_TOKEN = "<|pad|>"


def cache_dir() -> Path:
    """Where built artifacts are cached: $INTELLECT_CACHE or ~/.cache/intellect."""
    root = Path(os.environ.get("INTELLECT_CACHE", Path.home() / ".cache" / "intellect"))
    root.mkdir(parents=True, exist_ok=True)
    return root


@dataclass(frozen=True)
class TinyModelSpec:
    """A small Llama built from a config (for tests and the CPU learning demo)."""

    hidden_size: int = 128
    num_layers: int = 2
    num_heads: int = 4
    num_kv_heads: int = 2
    intermediate_size: int = 384
    vocab_size: int = 512
    """BPE vocabulary target (the trained tokenizer may end up a little smaller)"""
    max_positions: int = 512
    seed: int = 0
    corpus_size: int = 3000
    """synthetic tasks (all kinds) the tokenizer is trained on"""

    def key(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def _tokenizer_corpus(n: int, seed: int) -> list[str]:
    lines: list[str] = []
    for task in synthetic_task_set(n, seed=seed, kinds=("arithmetic", "word", "code")):
        lines.append(task.prompt)
        if task.answer:
            lines.append(f"{task.answer} \\boxed{{{task.answer}}}")
        for test in task.tests or []:
            lines.append(test)
    # the thinking-budget suffix and a little code vocabulary, so they tokenise compactly
    lines += ["Think for up to 128 tokens before answering.", "def return for in range if else"]
    return lines


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerBase:
    """Byte-level BPE with single-digit pre-tokenisation; EOS and PAD as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS_TOKEN, PAD_TOKEN],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS_TOKEN, bos_token=EOS_TOKEN, pad_token=PAD_TOKEN
    )


def build_tiny_model(spec: TinyModelSpec, out_dir: Path) -> Path:
    """Train the tokenizer, build the model from a config, save both to `out_dir`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = train_tokenizer(_tokenizer_corpus(spec.corpus_size, spec.seed), spec.vocab_size)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_layers,
        num_attention_heads=spec.num_heads,
        num_key_value_heads=spec.num_kv_heads,
        max_position_embeddings=spec.max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(spec.seed)
    model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def tiny_model_dir(spec: TinyModelSpec | None = None, root: Path | None = None) -> Path:
    """The cached tiny model for `spec` (built on first use, atomically)."""
    spec = spec or TinyModelSpec()
    root = root or cache_dir() / "models"
    final = root / f"tiny-llama-{spec.key()}"
    if build_cached(final, lambda tmp: _build_tiny(spec, tmp), prefix=".tiny-"):
        log.info("built tiny model at %s", final)
    return final


def _build_tiny(spec: TinyModelSpec, out: Path) -> None:
    build_tiny_model(spec, out)
    (out / "tiny_spec.json").write_text(json.dumps(asdict(spec), sort_keys=True))


def build_cached(final: Path, build: Callable[[Path], None], prefix: str) -> bool:
    """Build model dir `final` once: `build(tmp)` into a temp dir beside it, then rename (a concurrent
    builder's copy wins). False when `final` was already there."""
    if (final / "config.json").is_file() and (final / "model.safetensors").is_file():
        return False
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=prefix, dir=final.parent))
    try:
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:  # another process built it first: keep theirs
            if not (final / "model.safetensors").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def load_tokenizer(model_dir: str | Path) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(model_dir: str | Path, dtype: str = "float32", device: str = "cpu") -> PreTrainedModel:
    """Any HF causal LM directory, in `dtype` on `device`."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype))
    return model.to(device)


def smollm2_dir() -> Path:
    """The real SmolLM2-135M-Instruct as a safetensors directory (offline; cached by the verifier)."""
    return Path(smollm2_path())
