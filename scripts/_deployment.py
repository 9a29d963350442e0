"""Deployment parameters (pydantic models) and the network profiles of `brownie run deploy`.

The models and profiles are the SDK's (`intellect.sdk.deploy`: the deploy an installed wheel runs), re-exported
here for the scripts and the brownie tests; so is the deployment file's model (``Deployment``, ``ContractRecord``,
``DeploymentError``, owned by ``intellect.sdk._config``). ``abiSha256`` is the sha256 of the canonical JSON (sorted
keys, no spaces) of the contract's own ABI, the ``abi`` field of ``sdk/abi/<Contract>.json`` (see
scripts/export_abi.py: ``abi_sha256``).
"""

from __future__ import annotations

from intellect.sdk import CONTRACT_NAMES, DEPLOYMENT_SCHEMA, ContractRecord, Deployment, DeploymentError
from intellect.sdk.deploy import (
    EMPTY_FILE_CID,
    PROFILES,
    ROLE_IDS,
    TOKEN,
    DeployParams,
    dev_params,
    mainnet_params,
    params_for_network,
    testnet_params,
)
from intellect.sdk.deploy import DeployPoolParams as PoolParams
