"""Helpers for the Shardcast tests (a uniquely named module: `conftest` is a shared name)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from intellect.sdk.shardcast import Manifest, Relay

CLI = [sys.executable, "-m", "intellect.sdk.shardcast.cli"]


def write_tiny_hf_checkpoint(out: Path) -> Path:
    """A real (random-init) Llama checkpoint + a locally trained tokenizer, via save_pretrained."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, vocab_size=512, max_position_embeddings=128)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    corpus = [f"the policy step {i} moves {i * 7 % 13} shards through relay {i % 3}" for i in range(200)]
    tok.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=["<unk>", "<s>", "</s>"]))
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(out)
    return out


def relay_complete(relay: Relay, vid: str) -> bool:
    """Whether `relay` holds every shard of version `vid`."""
    st = relay.store.get(vid)
    return st is not None and st.complete


def corrupt_every_shard(relay: Relay, manifest: Manifest, where: Callable[[int], int], mask: int) -> None:
    """XOR byte `where(shard size)` of every verified shard of `manifest` on `relay`'s disk with `mask`."""
    for s in manifest.shards:
        p = relay.store.get(manifest.id).shard_path(s.index)  # type: ignore[union-attr]
        data = bytearray(p.read_bytes())
        data[where(len(data))] ^= mask
        p.write_bytes(bytes(data))


def assert_same_tree(a: Path, b: Path) -> None:
    fa = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    fb = sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert fa == fb
    for rel in fa:
        assert (a / rel).read_bytes() == (b / rel).read_bytes(), rel


def wait_for(pred, timeout: float = 90.0, interval: float = 0.02, what: str = "condition"):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


class Procs:
    """Starts CLI processes and kills whatever is left at teardown."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def start(self, *args: str, log_name: str) -> subprocess.Popen[bytes]:
        out = open(self.tmp / f"{log_name}.out", "wb")  # noqa: SIM115 - owned by the process
        log = open(self.tmp / f"{log_name}.log", "wb")  # noqa: SIM115 - owned by the process
        p = subprocess.Popen([*CLI, *args], stdout=out, stderr=log, env=self.env)
        self.procs.append(p)
        return p

    def server(self, *args: str, name: str) -> tuple[subprocess.Popen[bytes], str]:
        url_file = self.tmp / f"{name}.url"
        p = self.start(*args, "--url-file", str(url_file), log_name=name)
        wait_for(lambda: url_file.exists() or p.poll() is not None, what=f"{name} to listen")
        if p.poll() is not None:
            raise AssertionError(f"{name} exited: {(self.tmp / f'{name}.log').read_text()}")
        return p, url_file.read_text().strip()

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text(errors="replace")

    def stdout(self, name: str) -> str:
        return (self.tmp / f"{name}.out").read_text(errors="replace")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
