// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {INodeRegistry} from "../interfaces/INodeRegistry.sol";
import {IStakeManager} from "../interfaces/IStakeManager.sol";
import {ITaskLedger} from "../interfaces/ITaskLedger.sol";

// The TaskLedger's pool storage (file-level so that the ledger and PoolLife share the types).

// slot 0 is all that claimTask reads of a pool; 96+48+24+24+32+8+8+16 = 256 bits. `openUntil` is the pool's
// state (issue 37): 0 open without a liveness deadline (its trainer never sent a heartbeat), 1 paused, 2 finished,
// else open and taking claims up to that time (the trainer's last heartbeat or, once it sends heartbeats, its last
// checkpoint + leaseDuration; past it the pool is Stalled).
struct PoolHot {
    uint96 rewardPerUnit;
    uint48 latestStep;
    uint24 windowLength;
    uint24 leaseDuration;
    uint32 openUntil;
    uint8 asyncLevel;
    uint8 maxOpenLeases;
    uint16 maxReservationBps;
}

// the rest of a pool, read by submitWork (maxUnits), challenge/resolve/publishCheckpoint; 160+32+16+32 bits.
struct PoolCold {
    address trainer;
    uint32 votePeriod;
    uint16 quorum;
    uint32 maxUnits;
    address owner;
    uint128 challengeBond;
    uint128 slashAmount;
}

// escrow of a pool in one slot: submitWork and claimRewards move tokens between the two halves.
struct PoolFunds {
    uint128 budget;
    uint128 reserved;
}

/// @title PoolRules
/// @notice The checks a new pool's parameters must pass (ITaskLedger.createPool): each field in range, the
/// window at least the ledger's minimum, the protocol bounds (slash at most the workers' minimum stake, bond
/// and quorum at least the ledger's floors) and an unbonding period longer than lease + window + vote period.
/// An external library (linked into TaskLedger, called by DELEGATECALL once per createPool) so that the
/// ledger's runtime code stays under the EIP-170 limit of 24,576 bytes. It also writes a new pool (`create`) and
/// runs a pool's lifecycle (`setState`, ITaskLedger.setPoolState, issue 37: the trainer's heartbeat, pause and
/// resume by the owner, the finish that refunds the unreserved budget) on the ledger's storage.
library PoolRules {
    using SafeERC20 for IERC20;

    /// @notice Writes pool `poolId` of `params` into the ledger's storage, then `checkAndAnnounce`s it (a
    /// failed check reverts the writes too).
    /// @return exposure lease + window + vote period (see checkAndAnnounce)
    function create(
        mapping(uint32 => PoolHot) storage hots,
        mapping(uint32 => PoolCold) storage colds,
        mapping(uint32 => string) storage rulesCids,
        ITaskLedger.PoolParams calldata params,
        uint32 poolId,
        uint256 minWindowLength,
        uint256 minChallengeBond,
        uint256 minQuorum,
        IStakeManager stakeManager
    ) external returns (uint256 exposure) {
        // the narrowing casts are bounded by the checks below (which revert the whole call otherwise)
        hots[poolId] = PoolHot({
            rewardPerUnit: params.rewardPerUnit,
            latestStep: type(uint48).max,
            windowLength: uint24(params.windowLength),
            leaseDuration: uint24(params.leaseDuration),
            openUntil: 0,
            asyncLevel: uint8(params.asyncLevel),
            maxOpenLeases: params.maxOpenLeases,
            maxReservationBps: params.maxReservationBps
        });
        colds[poolId] = PoolCold({
            trainer: params.trainer,
            votePeriod: params.votePeriod,
            quorum: params.quorum,
            maxUnits: params.maxUnitsPerSubmission,
            owner: msg.sender,
            challengeBond: params.challengeBond,
            slashAmount: params.slashAmount
        });
        rulesCids[poolId] = params.rulesCid;
        exposure = _check(params, poolId, minWindowLength, minChallengeBond, minQuorum, stakeManager);
    }

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
        exposure = _check(params, poolId, minWindowLength, minChallengeBond, minQuorum, stakeManager);
    }

    function _check(
        ITaskLedger.PoolParams calldata params,
        uint32 poolId,
        uint256 minWindowLength,
        uint256 minChallengeBond,
        uint256 minQuorum,
        IStakeManager stakeManager
    ) private returns (uint256 exposure) {
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

    uint32 internal constant PAUSED = 1;
    uint32 internal constant FINISHED = 2;

    /// @notice The state a pool's `openUntil` stands for, read at a time after it (0: open, no liveness deadline).
    function stateOf(uint32 openUntil) internal pure returns (ITaskLedger.PoolState) {
        if (openUntil == PAUSED) return ITaskLedger.PoolState.Paused;
        if (openUntil == FINISHED) return ITaskLedger.PoolState.Finished;
        return openUntil == 0 ? ITaskLedger.PoolState.Open : ITaskLedger.PoolState.Stalled;
    }

    /// @notice See ITaskLedger.setPoolState; `hots`, `colds`, `funds`: the ledger's pool storage.
    function setState(
        mapping(uint32 => PoolHot) storage hots,
        mapping(uint32 => PoolCold) storage colds,
        mapping(uint32 => PoolFunds) storage funds,
        IERC20 token,
        uint32 poolId,
        ITaskLedger.PoolState state
    ) external {
        PoolHot storage hot = hots[poolId];
        if (hot.windowLength == 0) revert ITaskLedger.TaskLedgerUnknownPool(poolId);
        PoolCold storage cold = colds[poolId];
        uint32 was = hot.openUntil;
        bool owner = msg.sender == cold.owner;
        if (was == FINISHED) revert ITaskLedger.TaskLedgerPoolNotOpen(poolId, ITaskLedger.PoolState.Finished);
        uint32 next;
        if (state == ITaskLedger.PoolState.Open) {
            if (was == PAUSED) {
                // the owner's resume: the trainer gets a lease duration to be seen again
                if (!owner) revert ITaskLedger.TaskLedgerNotPoolOwner(poolId, msg.sender);
            } else if (msg.sender != cold.trainer) {
                revert ITaskLedger.TaskLedgerNotTrainer(poolId, msg.sender);
            }
            // the trainer's heartbeat: claims for another lease duration (its checkpoints do the same from then on)
            next = uint32(block.timestamp + hot.leaseDuration);
            hot.openUntil = next;
            if (was != PAUSED) return; // a heartbeat emits nothing
        } else if (state == ITaskLedger.PoolState.Paused) {
            if (!owner) revert ITaskLedger.TaskLedgerNotPoolOwner(poolId, msg.sender);
            hot.openUntil = next = PAUSED;
        } else if (state == ITaskLedger.PoolState.Finished) {
            // by the owner or the trainer at any time; by anyone once the trainer's heartbeat lapsed
            bool lapsed = was > FINISHED && block.timestamp > was;
            if (!owner && msg.sender != cold.trainer && !lapsed) {
                revert ITaskLedger.TaskLedgerNotPoolOwner(poolId, msg.sender);
            }
            hot.openUntil = next = FINISHED;
            PoolFunds storage f = funds[poolId];
            uint128 refund = f.budget;
            f.budget = 0;
            emit ITaskLedger.PoolStateChanged(poolId, state, next);
            emit ITaskLedger.PoolDefunded(poolId, cold.owner, refund, 0);
            if (refund > 0) token.safeTransfer(cold.owner, refund);
            return;
        } else {
            revert ITaskLedger.TaskLedgerInvalidPoolParam("state");
        }
        emit ITaskLedger.PoolStateChanged(poolId, state, next);
    }
}
