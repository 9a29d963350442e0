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
