"""What to tell a person about each custom error of the contracts (one table for the CLI and the scripts).

    REVERT_MESSAGES   error name -> a sentence over the error's arguments, in order (`{0}`, `{1}`, ...):
                      what `brownie run stake` prints for a decoded revert
    REVERT_HINTS      error name -> what to do next: the `intellect` CLI appends it to a `ContractRevert`
"""

from __future__ import annotations

__all__ = ["REVERT_HINTS", "REVERT_MESSAGES"]

REVERT_MESSAGES: dict[str, str] = {
    "StakeManagerZeroAmount": "the amount must be more than 0",
    "StakeManagerNodeNotActive": "node {0} is not an active registered node; register it first",
    "StakeManagerNotOwner": "{1} is not the owner of node {0}; send from the owner's account",
    "StakeManagerInsufficientStake": "node {0} has {1} wei active stake, less than the {2} wei requested",
    "StakeManagerNothingToWithdraw": "node {0} has nothing unbonding; run request_unstake first",
    "StakeManagerStillUnbonding": "node {0}'s unbonding stake releases at unix time {1}; try again then",
    "StakeManagerOpenChallenges": "node {0} has {1} open challenge(s); withdrawal waits until they are resolved",
    "ERC20InsufficientAllowance": "allowance too low ({1} < {2}); approve the stake manager first",
    "ERC20InsufficientBalance": "token balance too low ({1} < {2} wei); get tokens first (faucet on dev)",
    "TaskLedgerUnknownTask": "submission {0} does not exist",
    "TaskLedgerInvalidStatus": "submission {0} cannot be claimed in status {1} (2 = submitted is claimable)",
    "TaskLedgerWindowOpen": "submission {0}'s challenge window closes at unix time {1}; claim after that",
    "TaskLedgerSubmissionVoided": "submission {0} was voided by an upheld challenge against its worker",
    "TaskLedgerNotNodeOrOwner": "{1} is neither the node of submission {0} nor its owner",
    "TaskLedgerMixedOwners": "submission {0} belongs to owner {1}, the batch to {2}: claim them separately",
    "TaskLedgerEmptyBatch": "give at least one submission id",
    "IntellectTokenFaucetDisabled": "this deployment has no faucet (not a dev/test network)",
    "IntellectTokenFaucetCooldown": "{0} may use the faucet again at unix time {1}",
}

REVERT_HINTS: dict[str, str] = {
    "IntellectTokenFaucetCooldown": "wait until the cooldown ends",
    "IntellectTokenFaucetDisabled": "this network has no faucet; get tokens elsewhere",
    "NodeRegistryAlreadyActive": "the node is already registered (see `intellect node show`)",
    "NodeRegistryNotOwner": "use the owner's keystore",
    "NodeRegistryNotActive": "register the node first (`intellect node register`)",
    "StakeManagerNodeNotActive": "register the node first (`intellect node register`)",
    "StakeManagerInsufficientStake": "check `intellect stake status`",
    "StakeManagerStillUnbonding": "wait for the release time shown by `intellect stake status`",
    "StakeManagerNothingToWithdraw": "request an unstake first (`intellect stake unstake`)",
    "StakeManagerOpenChallenges": "wait until the open challenges are resolved",
    "ERC20InsufficientBalance": "get tokens first (`intellect faucet` on dev networks)",
    "TaskLedgerWindowOpen": "wait until the challenge window closes",
}

