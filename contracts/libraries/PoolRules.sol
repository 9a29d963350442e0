// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IStakeManager} from "../interfaces/IStakeManager.sol";
import {ITaskLedger} from "../interfaces/ITaskLedger.sol";

/// @title PoolRules
/// @notice The checks a new pool's parameters must pass (ITaskLedger.createPool): each field in range, the
/// window at least the ledger's minimum, the protocol bounds (slash at most the workers' minimum stake, bond
/// and quorum at least the ledger's floors) and an unbonding period longer than lease + window + vote period.
/// An external library (linked into TaskLedger, called by DELEGATECALL once per createPool) so that the
/// ledger's runtime code stays under the EIP-170 limit of 24,576 bytes.
library PoolRules {
    /// @notice Reverts with the ledger's error naming the first rule `params` breaks; else emits the ledger's
    /// PoolCreated for pool `poolId`, created by the caller of the ledger.
    /// @return exposure lease + window + vote period: how long after a claim the worker's stake must stay
    function checkAndAnnounce(
        ITaskLedger.PoolParams calldata params,
        uint32 poolId,
        uint256 minWindowLength,
        uint256 minChallengeBond,
        uint256 minQuorum,
        IStakeManager stakeManager
    ) external returns (uint256 exposure) {
        if (params.trainer == address(0)) revert ITaskLedger.TaskLedgerInvalidPoolParam("trainer");
        if (bytes(params.rulesCid).length == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("rulesCid");
        if (params.rewardPerUnit == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("rewardPerUnit");
        if (params.challengeBond == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("challengeBond");
        if (params.votePeriod == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("votePeriod");
        if (params.leaseDuration == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("leaseDuration");
        if (params.maxUnitsPerSubmission == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("maxUnitsPerSubmission");
        if (params.quorum == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("quorum");
        if (params.maxOpenLeases == 0) revert ITaskLedger.TaskLedgerInvalidPoolParam("maxOpenLeases");
        if (params.maxReservationBps == 0 || params.maxReservationBps > 10_000) {
            revert ITaskLedger.TaskLedgerInvalidPoolParam("maxReservationBps");
        }
        if (params.windowLength >= 2 ** 24) revert ITaskLedger.TaskLedgerInvalidPoolParam("windowLength");
        if (params.leaseDuration >= 2 ** 24) revert ITaskLedger.TaskLedgerInvalidPoolParam("leaseDuration");
        if (params.asyncLevel >= 2 ** 8) revert ITaskLedger.TaskLedgerInvalidPoolParam("asyncLevel");
        if (params.windowLength < minWindowLength) {
            revert ITaskLedger.TaskLedgerWindowTooShort(params.windowLength, minWindowLength);
        }
        // protocol bounds: no honeypot slash, no 1-wei bond, no quorum of one on real networks
        uint256 workerMinStake = stakeManager.minStake(INodeRegistry.Role.Worker);
        if (params.slashAmount > workerMinStake) revert ITaskLedger.TaskLedgerSlashAboveMinStake(params.slashAmount, workerMinStake);
        if (params.challengeBond < minChallengeBond) {
            revert ITaskLedger.TaskLedgerBondTooLow(params.challengeBond, minChallengeBond);
        }
        if (params.quorum < minQuorum) revert ITaskLedger.TaskLedgerQuorumTooLow(params.quorum, minQuorum);
        // A worker may unbond right after claiming: its stake must outlive lease + window + vote period.
        exposure = uint256(params.leaseDuration) + params.windowLength + params.votePeriod;
        uint256 unbonding = stakeManager.unbondingPeriod();
        if (unbonding <= exposure) revert ITaskLedger.TaskLedgerUnbondingTooShort(exposure, unbonding);
        emit ITaskLedger.PoolCreated(poolId, msg.sender, params.trainer, params);
    }
}
