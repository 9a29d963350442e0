#!/usr/bin/env bash
# Declares the Base networks for brownie (not in its defaults), idempotently: `brownie run deploy
# --network base-sepolia` then connects to $BASE_SEPOLIA_RPC_URL (expanded by brownie at connect time, so
# the URL is never written to disk). Fast when already declared (one grep).
set -euo pipefail
CONFIG="${HOME}/.brownie/network-config.yaml"
add() {  # id name chainid host explorer
  if [[ -f "$CONFIG" ]] && grep -q "id: $1\$" "$CONFIG"; then return 0; fi
  "$VENV/bin/brownie" networks add Base "$1" name="$2" chainid="$3" host="$4" explorer="$5" >/dev/null
  echo "bootstrap.d: brownie network $1 (chain $3) added"
}
cd "$ROOT"
add base-sepolia "Sepolia" 84532 '$BASE_SEPOLIA_RPC_URL' https://api-sepolia.basescan.org/api
add base-mainnet "Mainnet" 8453 '$BASE_MAINNET_RPC_URL' https://api.basescan.org/api
# brownie's own test chain: anvil writes every state past its in-memory history (~500 blocks) to
# ~/.foundry/anvil/tmp and leaves it there when stopped (hundreds of MB per thousand blocks; 72 GB
# after one day of test runs here). No test reads state that old: keep none on disk.
DEV_CMD="anvil --max-persisted-states 0"
if ! grep -q "cmd: $DEV_CMD\$" "$CONFIG"; then
  "$VENV/bin/brownie" networks modify development cmd="$DEV_CMD" >/dev/null
  echo "bootstrap.d: brownie network development runs '$DEV_CMD'"
fi
