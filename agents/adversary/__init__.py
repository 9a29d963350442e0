"""The attack kit, for tests and demos only: cheating workers (`worker.adversary: <name>`), the
security suite's cheater matrix (`.matrix`), a malicious relay node (`.relay`) and cheating validators
(`validator.adversary: <name>`, `VALIDATOR_ADVERSARIES`). The product never imports it;
`python -m intellect.agents.adversary --config FILE` runs an agent like `intellect-agent` does, with the
cheating worker or validator a config names.

Each variant is a `Worker` subclass that misbehaves in one way while claiming to be honest; the
validators must catch it and the trainer must never train on its work. Add a variant by
subclassing `Worker`, overriding one hook (`engine_checkpoint`, `generate_rollouts`,
`submission_for`) and registering it in `ADVERSARIES`.

- `wrong_model`: generates with a perturbed copy of the checkpoint (Gaussian noise of
  `NOISE` × each tensor's std on every weight: a cheaper or different model) while naming the
  real checkpoint's step and CID. Rewards and the file are self-consistent; only TOPLOC can tell.

Validators (a `Validator` subclass each):

- `lazy`: attests every submission it would check (`validator.check`: by default those it holds a slot of)
  without fetching or checking it (saves every check), never challenges and never votes. What the trainer's canaries (`trainer.canary`) are there to
  catch: its signed attestation of a canary is what `AttesterBook.slashAttester` slashes it with.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from intellect.agents.roles.validator import Validator, Verdict
from intellect.agents.roles.worker import Worker

__all__ = ["ADVERSARIES", "VALIDATOR_ADVERSARIES", "LazyValidator", "WrongModelWorker", "adversary_class",
           "rewrite_checkpoint", "validator_class"]

log = logging.getLogger(__name__)


class WrongModelWorker(Worker):
    """Generates with a different (perturbed) model but claims the on-chain checkpoint."""

    NOISE = 0.5

    def engine_checkpoint(self, step: int, path: Path) -> Path:
        import torch

        gen = torch.Generator().manual_seed(1234 + step)

        def perturb(v: torch.Tensor) -> torch.Tensor:
            noise = torch.randn(v.shape, generator=gen, dtype=torch.float32) * (float(v.float().std()) * self.NOISE)
            return (v.float() + noise).to(v.dtype)

        out = rewrite_checkpoint(path, self.data_dir / "wrong-model" / f"step-{step}", perturb)
        log.warning("adversary wrong_model: generating with a perturbed copy of step %d", step)
        return out


def rewrite_checkpoint(path: Path, out: Path, transform: Callable[[Any], Any]) -> Path:
    """A copy of checkpoint `path` at `out` with `transform` applied to every float tensor (kept if already built)."""
    from safetensors.torch import load_file, save_file

    if (out / "config.json").is_file():
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(path, tmp)
    for f in tmp.glob("*.safetensors"):
        state = load_file(str(f))
        for k, v in state.items():
            if v.is_floating_point() and v.numel() > 1:
                state[k] = transform(v)
        save_file(state, str(f), metadata={"format": "pt"})
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


ADVERSARIES: dict[str, type[Worker]] = {"wrong_model": WrongModelWorker}


class LazyValidator(Validator):
    """Attests everything without checking: no fetch, no checkpoint, no TOPLOC; never challenges or votes."""

    def verify_submission(self, sid: int, sub: dict[str, Any]) -> Verdict:
        log.warning("adversary lazy: submission %d attested unchecked", sid)
        return Verdict(submission_id=sid, accepted=True, detail="lazy: not checked")

    def _preload_latest(self) -> None:  # needs no checkpoint: it checks nothing
        return

    def _votes_and_resolutions(self) -> None:  # takes no part in disputes
        return


VALIDATOR_ADVERSARIES: dict[str, type[Validator]] = {"lazy": LazyValidator}


def validator_class(name: str | None) -> type[Validator]:
    """The validator class for `validator.adversary` (the honest `Validator` for None)."""
    if name is None:
        return Validator
    try:
        return VALIDATOR_ADVERSARIES[name]
    except KeyError:
        raise ValueError(f"unknown validator.adversary {name!r}; known: {sorted(VALIDATOR_ADVERSARIES)}") from None


def adversary_class(name: str | None) -> type[Worker]:
    """The worker class for `worker.adversary` (the honest `Worker` for None)."""
    if name is None:
        return Worker
    from intellect.agents.adversary import (
        matrix,  # deferred: matrix imports this package (the cheater matrix, issue 5)
    )

    matrix.register(ADVERSARIES)
    try:
        return ADVERSARIES[name]
    except KeyError:
        raise ValueError(f"unknown worker.adversary {name!r}; known: {sorted(ADVERSARIES)}") from None


