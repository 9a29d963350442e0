"""The GRPO trainer: HF causal LM in, rollouts in, safetensors checkpoints out.

    trainer = GRPOTrainer(model_dir, out_dir, GRPOConfig())
    trainer.save_checkpoint()                    # <out>/step-0: what inference starts from
    stats = trainer.train_step(samples)          # one rollout step → step-1, step-2, ...

One `train_step`:
1. refuses samples staler than `async_level` (t − s > async_level) and drops groups whose
   advantages are all zero (no signal);
2. recomputes the old log-probs with the current weights (no grad) — the trainer, not the
   worker, is the reference for π_old, so inference numerics never enter the ratio;
3. splits the samples into `optimizer_steps` shuffled mini-batches; for each: token log-probs,
   `grpo_loss` (constant denominator = mini-batch size × max completion tokens), backward,
   grad-norm clip (0.1), AdamW step (learning rate warmed up linearly over `warmup_steps` updates);
4. saves `<out>/step-<t+1>/` atomically (temp dir + rename): model.safetensors, config.json,
   tokenizer files and `intellect_checkpoint.json` (schema, step, parent, base), and beside it
   `<out>/trainer-state/step-<t+1>.pt`: AdamW's moments, the update count and the RNG states
   (Python's shuffle RNG, torch's), so a trainer restarted from its newest checkpoint — even after
   `kill -9` — makes the same next checkpoint, bit for bit, as one that never stopped. The state
   is kept out of the step dir: the step dir is what Shardcast sends to every worker.

A step with nothing to learn from (every group filtered out, or every update skipped for a
non-finite gradient) raises `NoSignalError` and writes nothing: the trainer never publishes a
checkpoint identical to the last one; its caller refills the batch and tries again.

With more than one process in a torch.distributed group (`init_distributed()`, e.g. under
`torchrun`) every decoder layer and the model are sharded with FSDP2 (`fully_shard`, gloo on
CPU, NCCL on GPUs). Every rank is given the *same* samples; the mini-batches are drawn once (same
seeded shuffle on every rank) and each rank computes the loss of its slice of every mini-batch
with the mini-batch's global constant denominator, so the reduced gradient — and the update — is
the one a single process makes on the whole batch (tested with 2 gloo ranks). Rank 0 writes the
full state dict; the other ranks write nothing. On one process the trainer is a plain module.

    torchrun --nproc-per-node 2 -m intellect.agents.grpo_trainer --model-dir M --out O r0.rollouts r1.rollouts
    torchrun --nproc-per-node 8 -m intellect.agents.grpo_trainer --device cuda --bf16 --model-dir M --out O r.rollouts
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from intellect.agents.engines import CHECKPOINT_META
from intellect.agents.grpo import (
    UntrustedValueError,
    check_staleness,
    constant_denominator,
    grpo_loss,
    token_logprobs,
)
from intellect.agents.recipe import GRPOConfig
from intellect.sdk import IntellectError
from intellect.verifier.rollouts import RolloutFile

log = logging.getLogger(__name__)

__all__ = ["CHECKPOINT_SCHEMA", "GRPOConfig", "GRPOTrainer", "NoSignalError", "NonFiniteWeightsError", "Sample",
           "StepStats", "group_samples", "init_distributed", "signal_groups"]

CHECKPOINT_SCHEMA = "intellect.checkpoint/v1"


class NoSignalError(IntellectError, RuntimeError):
    """A step had nothing to learn from (no group with a non-zero advantage, or every update skipped):
    no step was taken and nothing was written; refill the batch and try again."""


class NonFiniteWeightsError(IntellectError, RuntimeError):
    """A step left a weight tensor NaN or infinite; the weights were restored and nothing was saved."""


@dataclass(frozen=True)
class Sample:
    """One completion as the trainer sees it (built from a `RolloutRow`)."""

    problem_id: str
    prompt_ids: Sequence[int]
    completion_ids: Sequence[int]
    advantage: float
    policy_step: int
    reward: float = 0.0
    source: str = ""
    """the submission (rollout file) the sample came from: two files' groups of one problem at one policy step
    are two GRPO groups (their advantages were computed apart), not one"""

    @classmethod
    def from_row(cls, row: Any, source: str = "") -> Sample:
        return cls(row.problem_id, row.prompt_ids, row.completion_ids, row.advantage, row.policy_step, row.reward,
                   source)


def group_samples(samples: Sequence[Any]) -> dict[tuple[str, int, str], list[Any]]:
    """The GRPO groups of a batch: samples keyed by (problem id, policy step, source submission), in order of
    first appearance."""
    groups: dict[tuple[str, int, str], list[Any]] = defaultdict(list)
    for s in samples:
        groups[(s.problem_id, s.policy_step, getattr(s, "source", ""))].append(s)
    return dict(groups)


def has_signal(group: Sequence[Any]) -> bool:
    """A group can be learnt from iff some completion's advantage is non-zero (not all rewards equal)."""
    return any(s.advantage != 0.0 for s in group)


def signal_groups(samples: Sequence[Any], filter_zero_advantage: bool = True) -> int:
    """Groups a training step can learn from: with the zero-advantage filter on, those `train_step` keeps
    (INTELLECT-2's online filtering); every group otherwise. The trainer role refills a step's batch from
    further submissions until this reaches `trainer.batch_groups` (`intellect.agents.roles.trainer`)."""
    groups = group_samples(samples)
    return sum(map(has_signal, groups.values())) if filter_zero_advantage else len(groups)


@dataclass
class StepStats:
    """What one rollout step did (logged cleanrl-style)."""

    step: int
    samples: int
    dropped_groups: int
    loss: float
    clip_fraction: float
    approx_kl: float
    grad_norm: float
    lr: float
    reward_mean: float
    tokens: int
    tokens_per_s: float
    """completion tokens trained per second of this step (old log-probs + updates + save)"""
    seconds: float
    checkpoint: str | None = None
    skipped_updates: int = 0
    """optimizer steps skipped because the gradient norm was not finite"""
    extra: dict[str, float] = field(default_factory=dict)


class GRPOTrainer:
    """Trains an HF causal LM with GRPO and writes a checkpoint after every step."""

    def __init__(self, model_dir: str | Path, out_dir: str | Path, config: GRPOConfig | None = None) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.config = config or GRPOConfig()
        self.model_dir = Path(model_dir)
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(self.config.seed)
        self._rng = random.Random(self.config.seed)
        meta_path = self.model_dir / CHECKPOINT_META
        meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        self.base_dir = Path(meta.get("base") or self.model_dir)
        """the model step 0 was made from: the KL reference, whatever step the trainer resumed from"""
        self.updates = 0
        """optimizer updates made since step 0 (drives the learning-rate warm-up)"""
        self.checkpoint_files: dict[str, bytes] = {}
        """files written into every checkpoint saved from now on, name → bytes, in the same atomic rename (the
        trainer role's difficulty table, `intellect.verifier.difficulty`)"""
        self.device = torch.device(self.config.device)
        self.model = AutoModelForCausalLM.from_pretrained(
            str(self.model_dir), dtype=getattr(torch, self.config.dtype)
        ).to(self.device)
        self.model.config.use_cache = False
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.world_size = 1
        self.rank = 0
        self._maybe_shard()
        self.ref_model = None
        if self.config.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(str(self.base_dir)).to(self.device).eval()
        self.optimizer = torch.optim.AdamW(
            self.model.parameters(), lr=self.config.lr, betas=self.config.betas,
            weight_decay=self.config.weight_decay,
        )
        self.step = int(meta["step"]) if meta else 0
        """the policy step the weights are (0 for a base model; a checkpoint's own step on resume)"""
        self._load_state()

    # -- distributed (guarded) -------------------------------------------------------------

    def _maybe_shard(self) -> None:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
            return
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        self.world_size, self.rank = dist.get_world_size(), dist.get_rank()
        self._arch = type(self.model).__name__  # fully_shard swaps in a class named FSDP<arch>
        mesh = init_device_mesh(self.device.type, (self.world_size,))
        layers = getattr(getattr(self.model, "model", None), "layers", None)
        if layers is None:
            raise TypeError(f"FSDP: {self._arch} has no .model.layers to shard (a decoder-only HF causal LM expected)")
        kwargs: dict[str, Any] = {"mesh": mesh}
        if self.config.autocast is not None:  # bf16 all-gathered params and compute, fp32 gradient reduction
            from torch.distributed.fsdp import MixedPrecisionPolicy

            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=getattr(torch, self.config.autocast),
                                                       reduce_dtype=torch.float32)
        for layer in layers:
            fully_shard(layer, **kwargs)
        fully_shard(self.model, **kwargs)
        log.info("FSDP: rank %d of %d on %s (compute %s)", self.rank, self.world_size, self.device,
                 self.config.autocast or self.config.dtype)

    # -- optimizer and RNG state ------------------------------------------------------------

    def state_path(self, step: int | None = None) -> Path:
        """Where the optimizer and RNG state of a step lives (one file per rank, beside the step dir)."""
        return self.out_dir / "trainer-state" / f"step-{self.step if step is None else step}-rank{self.rank}.pt"

    def _save_state(self) -> None:
        path = self.state_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {"step": self.step, "updates": self.updates, "optimizer": self.optimizer.state_dict(),
                 "torch_rng": torch.get_rng_state(), "python_rng": self._rng.getstate(),
                 "cuda_rng": torch.cuda.get_rng_state_all() if self.device.type == "cuda" else None}
        tmp = path.with_name(path.name + ".tmp")
        torch.save(state, tmp)
        with open(tmp, "rb") as fh:  # on disk before the rename makes it the state of this step
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def _load_state(self) -> None:
        """Resume AdamW's moments, the update count and the RNG states of the step the model dir holds
        (when it is one of this trainer's own checkpoints); a fresh optimizer otherwise (logged)."""
        if self.step == 0 and not (self.model_dir / CHECKPOINT_META).is_file():
            return
        path = self.model_dir.parent / "trainer-state" / f"step-{self.step}-rank{self.rank}.pt"
        if not path.is_file():
            log.warning("no optimizer/RNG state for step %d at %s: the optimizer starts fresh", self.step, path)
            return
        state = torch.load(path, map_location=self.device, weights_only=False)  # our own file, written above
        if int(state["step"]) != self.step:
            raise ValueError(f"trainer state {path} is of step {state['step']}, the model of step {self.step}")
        self.optimizer.load_state_dict(state["optimizer"])
        self.updates = int(state["updates"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and self.device.type == "cuda":
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        self._rng.setstate(state["python_rng"])
        log.info("resumed optimizer and RNG state of step %d (%d updates) from %s", self.step, self.updates, path)

    def _lr(self) -> float:
        """The learning rate of the next update: linear warm-up over `warmup_steps` updates, then constant."""
        w = self.config.warmup_steps
        return self.config.lr if w <= 0 else self.config.lr * min(1.0, (self.updates + 1) / w)

    # -- log-probs --------------------------------------------------------------------------

    def _batch(self, samples: Sequence[Sample]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Right-padded (B, L) input ids, attention mask, targets (B, L-1), completion mask (B, L-1)."""
        lengths = [len(s.prompt_ids) + len(s.completion_ids) for s in samples]
        width = max(lengths)
        ids = torch.full((len(samples), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((len(samples), width), dtype=torch.long)
        comp = torch.zeros((len(samples), width), dtype=torch.float32)
        for i, s in enumerate(samples):
            seq = list(s.prompt_ids) + list(s.completion_ids)
            ids[i, : len(seq)] = torch.tensor(seq)
            attn[i, : len(seq)] = 1
            comp[i, len(s.prompt_ids) : len(seq)] = 1.0
        # position t predicts token t+1: targets and mask shift left by one
        return ids.to(self.device), attn.to(self.device), ids[:, 1:].to(self.device), comp[:, 1:].to(self.device)

    def _logprobs(self, model: Any, ids: torch.Tensor, attn: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        # autocast on one process; sharded, FSDP2's mixed-precision policy casts the parameters itself
        compute = self.config.autocast if self.world_size == 1 else None
        with torch.autocast(self.device.type, dtype=getattr(torch, compute or "float32"), enabled=compute is not None):
            logits = model(input_ids=ids, attention_mask=attn, use_cache=False).logits[:, :-1, :]  # (B, L-1, V)
        return token_logprobs(logits, targets)  # (B, L-1) in float32

    @torch.no_grad()
    def logprobs(self, samples: Sequence[Sample]) -> list[list[float]]:
        """Completion-token log-probs under the current weights (for tests and validators)."""
        ids, attn, targets, mask = self._batch(samples)
        lp = self._logprobs(self.model, ids, attn, targets)
        return [lp[i][mask[i] > 0].tolist() for i in range(len(samples))]

    # -- one rollout step -------------------------------------------------------------------

    def _filter(self, samples: Sequence[Sample]) -> tuple[list[Sample], int]:
        kept: list[Sample] = []
        dropped = 0
        for group in group_samples(samples).values():
            if self.config.filter_zero_advantage and not has_signal(group):
                dropped += 1
                continue
            kept += group
        return kept, dropped

    def _check_samples(self, samples: Sequence[Sample]) -> None:
        """Refuse a batch holding a sample too stale for the async level, an advantage or reward that is not a
        bounded finite number, or a completion longer than the loss's constant denominator allows."""
        cfg = self.config
        for s in samples:
            check_staleness(self.step, s.policy_step, cfg.async_level)
            if not (math.isfinite(s.advantage) and abs(s.advantage) <= cfg.max_abs_advantage):
                raise UntrustedValueError(
                    f"sample of problem {s.problem_id!r} has advantage {s.advantage!r}, not a finite number "
                    f"within ±{cfg.max_abs_advantage}"
                )
            if not math.isfinite(s.reward):
                raise UntrustedValueError(f"sample of problem {s.problem_id!r} has reward {s.reward!r}")
            if len(s.completion_ids) > cfg.max_completion_tokens:
                raise ValueError(
                    f"sample of problem {s.problem_id!r} has {len(s.completion_ids)} completion tokens, "
                    f"more than max_completion_tokens={cfg.max_completion_tokens}"
                )

    def _reference_pass(self, minibatches: list[list[Sample]]) -> list[tuple[Any, ...]]:
        """Per mini-batch, this rank's slice as tensors with its old (and reference) log-probs, before any update:
        (ids, attn, targets, mask, old, ref, advantages, the loss's constant denominator)."""
        cfg = self.config
        prepared = []
        self.model.eval()  # no dropout in the reference pass
        with torch.no_grad():
            for mb in minibatches:
                denominator = constant_denominator(len(mb), cfg.max_completion_tokens)
                local = mb[self.rank :: self.world_size]
                weight = 1.0
                if not local:  # fewer samples than ranks: a zero-weight stand-in keeps the collectives
                    local, weight = mb[:1], 0.0
                ids, attn, targets, mask = self._batch(local)
                mask = mask * weight
                old = self._logprobs(self.model, ids, attn, targets)
                ref = self._logprobs(self.ref_model, ids, attn, targets) if self.ref_model is not None else None
                adv = torch.tensor([s.advantage for s in local], dtype=torch.float32, device=self.device)
                prepared.append((ids, attn, targets, mask, old, ref, adv, denominator))
        return prepared

    def train_step(self, samples: Sequence[Sample]) -> StepStats:
        """One rollout step: filter, recompute old log-probs, several optimizer steps, save."""
        cfg = self.config
        t0 = time.perf_counter()
        self._check_samples(samples)
        kept, dropped = self._filter(samples)
        if not kept:
            raise NoSignalError(f"step {self.step + 1}: all {dropped} groups have zero advantage; nothing trained")
        reward_mean = sum(s.reward for s in samples) / max(len(samples), 1)
        totals = {"loss": 0.0, "clip_fraction": 0.0, "approx_kl": 0.0, "grad_norm": 0.0}
        n_updates = 0
        skipped = 0
        tokens = sum(len(s.completion_ids) for s in kept)
        # the same seeded shuffle on every rank: the mini-batches are global, a rank trains
        # its slice of each with the global denominator (see the module doc)
        order = list(range(len(kept)))
        self._rng.shuffle(order)
        n_mb = min(cfg.optimizer_steps, len(kept))
        minibatches = [[kept[j] for j in order[k::n_mb]] for k in range(n_mb)]
        prepared = self._reference_pass(minibatches)
        self.model.train()
        for ids, attn, targets, mask, old, ref, adv, denominator in prepared:
            new = self._logprobs(self.model, ids, attn, targets)
            loss, st = grpo_loss(
                new, old, adv, mask, loss_denominator=denominator,
                epsilon=cfg.epsilon, delta=cfg.delta, ref_logprobs=ref, kl_coef=cfg.kl_coef,
            )
            self.optimizer.zero_grad(set_to_none=True)
            # FSDP averages gradients over ranks; the ranks' losses are parts of one sum
            (loss * self.world_size).backward()
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
            gn = float(grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm)
            if not math.isfinite(gn) or not math.isfinite(st.loss):
                # clipping an infinite norm multiplies by 0: inf * 0 = NaN in every weight it touches
                log.warning("step %d: gradient norm %s / loss %s not finite: optimizer step skipped",
                            self.step + 1, gn, st.loss)
                self.optimizer.zero_grad(set_to_none=True)
                skipped += 1
                continue
            lr = self._lr()
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            self.optimizer.step()
            self.updates += 1
            loss_sum, clip_frac, kl, _ = self._reduce_stats(st)
            totals["loss"] += loss_sum
            totals["clip_fraction"] += clip_frac
            totals["approx_kl"] += kl
            totals["grad_norm"] += gn
            n_updates += 1
        self.model.eval()
        self._check_finite_weights()
        if n_updates == 0:
            # every update was skipped: the weights are those of step `self.step`; publishing them again
            # as a new step would tell every worker to reload an identical checkpoint
            raise NoSignalError(f"step {self.step + 1}: all {skipped} optimizer updates skipped (non-finite "
                                f"gradients); nothing trained")
        self.step += 1
        ckpt = self.save_checkpoint()
        seconds = time.perf_counter() - t0
        n = n_updates  # > 0: a step whose every update was skipped raised above
        stats = StepStats(
            step=self.step, samples=len(kept), dropped_groups=dropped,
            loss=totals["loss"] / n, clip_fraction=totals["clip_fraction"] / n,
            approx_kl=totals["approx_kl"] / n, grad_norm=totals["grad_norm"] / n,
            lr=self.optimizer.param_groups[0]["lr"], reward_mean=reward_mean, tokens=tokens,
            tokens_per_s=tokens / max(seconds, 1e-9),
            seconds=seconds, checkpoint=str(ckpt) if ckpt else None, skipped_updates=skipped,
        )
        log.info(
            "step %d: loss %.4f reward %.3f kl %.5f clipfrac %.3f gnorm %.3f lr %.2e samples %d (dropped %d groups) %.0f tok/s",
            stats.step, stats.loss, stats.reward_mean, stats.approx_kl, stats.clip_fraction,
            stats.grad_norm, stats.lr, stats.samples, dropped, stats.tokens_per_s,
        )
        return stats

    def _check_finite_weights(self) -> None:
        """Raise `NonFiniteWeightsError` (after restoring the weights of step `self.step` and dropping
        the optimizer's moments) if any parameter is NaN or infinite: such a step is never saved."""
        bad = [name for name, p in self.model.named_parameters()
               if not bool(torch.isfinite(p.full_tensor() if hasattr(p, "full_tensor") else p).all())]
        if not bad:
            return
        self._restore_weights()
        raise NonFiniteWeightsError(
            f"training step {self.step + 1} made {len(bad)} weight tensors non-finite (first: {bad[0]}); "
            f"weights restored to step {self.step}, no checkpoint written"
        )

    def _restore_weights(self) -> None:
        from safetensors.torch import load_file

        for src in (self.checkpoint_path(), self.model_dir):
            files = sorted(Path(src).glob("*.safetensors"))
            if files:
                state: dict[str, torch.Tensor] = {}
                for f in files:
                    state.update(load_file(str(f)))
                self.model.load_state_dict(state, strict=False)
                break
        else:
            log.error("no saved weights of step %d to restore from", self.step)
        self.optimizer.state.clear()

    def _reduce_stats(self, st: Any) -> tuple[float, float, float, int]:
        """Loss (a sum over ranks) and token-weighted clip fraction / KL over all ranks."""
        if self.world_size == 1:
            return st.loss, st.clip_fraction, st.approx_kl, st.tokens
        import torch.distributed as dist

        t = torch.tensor([st.loss, st.clip_fraction * st.tokens, st.approx_kl * st.tokens, float(st.tokens)],
                         dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        n = max(float(t[3]), 1.0)
        return float(t[0]), float(t[1]) / n, float(t[2]) / n, int(t[3])

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint_path(self, step: int | None = None) -> Path:
        return self.out_dir / f"step-{self.step if step is None else step}"

    def save_checkpoint(self) -> Path | None:
        """Write `<out>/step-<step>/` atomically; returns it (None on ranks other than 0)."""
        state = self._full_state_dict()
        if self.rank != 0:
            self._save_state()  # each rank's optimizer holds its own shard of the moments
            return None
        final = self.checkpoint_path()
        tmp = Path(tempfile.mkdtemp(prefix=f".step-{self.step}-", dir=self.out_dir))
        try:
            self.model.save_pretrained(tmp, state_dict=state, safe_serialization=True)
            if self.world_size > 1:  # save_pretrained recorded the FSDP wrapper's class name
                cfg_path = tmp / "config.json"
                hf_config = json.loads(cfg_path.read_text())
                hf_config["architectures"] = [self._arch]
                cfg_path.write_text(json.dumps(hf_config, indent=2, sort_keys=True))
            self.tokenizer.save_pretrained(tmp)
            meta = {"schema": CHECKPOINT_SCHEMA, "step": self.step, "parent": str(self.model_dir),
                    "base": str(self.base_dir),
                    "config": self.config.model_dump(exclude={"betas"})}
            (tmp / CHECKPOINT_META).write_text(json.dumps(meta, sort_keys=True, default=str))
            for name, data in self.checkpoint_files.items():
                (tmp / name).write_bytes(data)
            if final.exists():
                shutil.rmtree(final)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._save_state()  # before `latest` names this step: a step with a marker always has its state
        self._write_latest()
        self._prune()
        return final

    def _full_state_dict(self) -> dict[str, torch.Tensor] | None:
        if self.world_size == 1:
            return None  # save_pretrained reads the module itself
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))

    def _write_latest(self) -> None:
        tmp = self.out_dir / ".latest.tmp"
        tmp.write_text(str(self.step))
        os.replace(tmp, self.out_dir / "latest")

    def _prune(self) -> None:
        keep = self.config.keep_checkpoints
        if keep <= 0:
            return
        steps = sorted(int(p.name.split("-")[1]) for p in self.out_dir.glob("step-*") if p.name.split("-")[1].isdigit())
        for s in steps[:-keep]:
            shutil.rmtree(self.out_dir / f"step-{s}", ignore_errors=True)
            for f in (self.out_dir / "trainer-state").glob(f"step-{s}-rank*.pt"):
                f.unlink(missing_ok=True)


def latest_checkpoint(out_dir: str | Path) -> Path | None:
    """The newest complete `step-<n>` dir under a trainer's output dir, or None."""
    out_dir = Path(out_dir)
    marker = out_dir / "latest"
    if not marker.is_file():
        return None
    path = out_dir / f"step-{int(marker.read_text())}"
    return path if (path / CHECKPOINT_META).is_file() else None


__all__ += ["latest_checkpoint"]


def init_distributed(device: str = "cpu", timeout: timedelta | None = None) -> tuple[int, int, str]:
    """Join the torch.distributed group described by torchrun's environment (RANK, WORLD_SIZE,
    MASTER_ADDR/PORT) if there is one: gloo on CPU, NCCL on CUDA. Returns (rank, world size,
    this rank's device); (0, 1, device) without a group. `GRPOTrainer` shards itself when a
    group of more than one process is initialised. `timeout`: how long a collective waits for the
    other ranks (torch's default for gloo, 30 minutes, without it).

    The ranks meet in torchrun's store under a prefix of their attempt (`TORCHELASTIC_RESTART_COUNT`): after a
    restart (`--max-restarts`) a rank could otherwise read the address a killed rank of the previous attempt
    published there and fail to connect (seen with gloo on one host: rank 0 dialled the dead rank 1's port)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, device
    if device.startswith("cuda"):
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        rank = int(os.environ["RANK"])
        wait = timeout if timeout is not None else timedelta(minutes=30)
        agent_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts it
        store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                              is_master=rank == 0 and not agent_store, timeout=wait)
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        dist.init_process_group(backend="nccl" if device.startswith("cuda") else "gloo",
                                store=dist.PrefixStore(f"intellect/attempt-{attempt}", store),
                                rank=rank, world_size=world, timeout=wait)
    return dist.get_rank(), dist.get_world_size(), device


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m intellect.agents.grpo_trainer` (or under `torchrun`): one GRPO step per rollout file."""
    import click

    @click.command(help="Train one GRPO step per rollout file (in order) and write a checkpoint after each. "
                        "Under torchrun with several processes the model is sharded with FSDP2.")
    @click.option("--model-dir", type=click.Path(path_type=Path, exists=True, file_okay=False), required=True,
                  help="HF causal LM dir to start from (a trainer checkpoint resumes its step)")
    @click.option("--out", type=click.Path(path_type=Path), required=True, help="checkpoint output dir")
    @click.option("--lr", type=float, default=GRPOConfig.model_fields["lr"].default, show_default=True)
    @click.option("--optimizer-steps", type=int, default=GRPOConfig.model_fields["optimizer_steps"].default, show_default=True)
    @click.option("--max-completion-tokens", type=int, default=GRPOConfig.model_fields["max_completion_tokens"].default, show_default=True)
    @click.option("--async-level", type=int, default=GRPOConfig.model_fields["async_level"].default, show_default=True)
    @click.option("--seed", type=int, default=GRPOConfig.model_fields["seed"].default, show_default=True)
    @click.option("--device", default="cpu", show_default=True, help="cpu or cuda (each rank its LOCAL_RANK GPU)")
    @click.option("--bf16", is_flag=True, help="bf16 compute (FSDP2 mixed precision / autocast), fp32 master weights")
    @click.argument("rollouts", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, dir_okay=False))
    def cli(model_dir: Path, out: Path, lr: float, optimizer_steps: int, max_completion_tokens: int,
            async_level: int, seed: int, device: str, bf16: bool, rollouts: tuple[Path, ...]) -> None:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        rank, world, device = init_distributed(device)
        try:
            trainer = GRPOTrainer(model_dir, out, GRPOConfig(
                lr=lr, optimizer_steps=optimizer_steps, max_completion_tokens=max_completion_tokens,
                async_level=async_level, seed=seed, device=device, autocast="bfloat16" if bf16 else None))
            for path in rollouts:
                rf = RolloutFile.read(path)
                stats = trainer.train_step([Sample.from_row(r) for r in rf])
                if rank == 0:
                    click.echo(json.dumps({**asdict(stats), "rollouts": str(path), "world_size": world}))
        finally:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    cli(args=list(argv) if argv is not None else None)


if __name__ == "__main__":
    main()
