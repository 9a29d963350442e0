// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {INodeRegistry} from "./INodeRegistry.sol";

/// @title IStakeManager
/// @notice Stake per node. Anyone may fund a node's stake; only the node's owner unbonds and withdraws.
/// Unbonding is ONE aggregated entry per node (amounts add up, the release time restarts), so `withdraw` is
/// O(1) forever. Slashable stake = active + unbonding (taken from active first). Only the TaskLedger
/// (SLASHER_ROLE) slashes and holds the per-node open-challenge lock that blocks withdrawals.
///
/// Validator weight: a node's active stake while it is an active validator in the registry, else 0. It is
/// checkpointed per node and in total by block number (OpenZeppelin Checkpoints), so a challenge fixes its
/// electorate at the block before it opened: votes weigh by stake at that block, exits, unstakes and new
/// registrations after it change nothing. The registry tells this contract of every registration and exit.
interface IStakeManager {
    /// @notice Stake of one node.
    /// @param active stake that counts towards the role's minimum
    /// @param unbonding stake waiting for `releaseAt` (still slashable)
    /// @param releaseAt time from which `unbonding` may be withdrawn (0 if nothing unbonds)
    /// @param openChallenges challenges open against the node's work; withdrawals wait while > 0
    /// @param role the node's role in the registry (kept here from the registry's hook, next to the active stake:
    /// the ledger's eligibility check reads one slot; stake amounts are held in 112 bits, 5.2e15 tokens)
    /// @param status the node's status in the registry (idem)
    struct StakeInfo {
        uint128 active;
        uint128 unbonding;
        uint64 releaseAt;
        uint32 openChallenges;
        INodeRegistry.Role role;
        INodeRegistry.Status status;
    }

    /// @notice Emitted on every change of a node's stake (the one internal path `_updateStake`).
    event StakeUpdated(address indexed node, uint256 active, uint256 unbonding, uint256 releaseAt);

    /// @notice Emitted when `from` adds `amount` to `node`'s active stake.
    event Staked(address indexed node, address indexed from, uint256 amount);

    /// @notice Emitted when the owner moves `amount` from active to unbonding; all of it releases at `releaseAt`.
    event UnstakeRequested(address indexed node, uint256 amount, uint256 totalUnbonding, uint256 releaseAt);

    /// @notice Emitted when the owner withdraws the released unbonding stake of `node` to `to`.
    event Withdrawn(address indexed node, address indexed to, uint256 amount);

    /// @notice Emitted when the ledger slashes `amount` from `node`: `challengerReward` to `challenger`, the
    /// rest (`treasuryAmount`) to the treasury.
    event Slashed(
        address indexed node, address indexed challenger, uint256 amount, uint256 challengerReward, uint256 treasuryAmount
    );

    /// @notice Emitted when `node`'s validator weight changes to `weight`; `totalWeight` is the new sum over all nodes.
    event ValidatorWeightUpdated(address indexed node, uint256 weight, uint256 totalWeight);

    /// @notice Emitted when the registry rotates node key `oldNode` to `newNode` (`NodeRegistry.rotateKey`): the
    /// stake record moved whole (StakeUpdated follows for both keys).
    event StakeMoved(
        address indexed oldNode, address indexed newNode, uint256 active, uint256 unbonding, uint256 openChallenges
    );

    /// @notice Emitted when the ledger opens or closes a challenge against `node`'s work.
    event ChallengeLockUpdated(address indexed node, uint256 openChallenges);

    /// @notice Emitted when the admin sets the minimum active stake of `role`.
    event MinStakeSet(INodeRegistry.Role indexed role, uint256 amount);

    /// @notice Emitted when the admin sets the unbonding period.
    event UnbondingPeriodSet(uint256 period);

    /// @notice Emitted when the ledger raises the floor under the unbonding period (a pool's window + vote period).
    event UnbondingFloorRaised(uint256 floor);

    /// @notice Emitted when the admin sets the challenger's share of a slash, in basis points.
    event ChallengerShareSet(uint256 bps);

    /// @notice Emitted when the admin sets the treasury.
    event TreasurySet(address indexed treasury);

    /// @notice Thrown for a zero amount.
    error StakeManagerZeroAmount();

    /// @notice Thrown for a zero address where one is required.
    error StakeManagerZeroAddress();

    /// @notice Thrown when staking on a node that is not active in the registry.
    error StakeManagerNodeNotActive(address node);

    /// @notice Thrown when `caller` is not the owner of `node`.
    error StakeManagerNotOwner(address node, address caller);

    /// @notice Thrown when unstaking more than the active stake.
    error StakeManagerInsufficientStake(address node, uint256 active, uint256 requested);

    /// @notice Thrown when `node` has nothing unbonding.
    error StakeManagerNothingToWithdraw(address node);

    /// @notice Thrown when withdrawing before the unbonding stake releases at `releaseAt`.
    error StakeManagerStillUnbonding(address node, uint256 releaseAt);

    /// @notice Thrown when withdrawing while `count` challenges are open against the node's work.
    error StakeManagerOpenChallenges(address node, uint256 count);

    /// @notice Thrown when the unbonding period would not exceed `floor` (the longest window + vote period).
    error StakeManagerUnbondingTooShort(uint256 period, uint256 floor);

    /// @notice Thrown for a challenger share above 10_000 basis points.
    error StakeManagerInvalidShare(uint256 bps);

    /// @notice Thrown when `caller` is not the node registry.
    error StakeManagerNotRegistry(address caller);

    /// @notice Thrown when looking up a weight at block `blockNumber`, not before the current block `current`.
    error StakeManagerFutureLookup(uint256 blockNumber, uint256 current);

    /// @notice Thrown when the ledger closes a challenge lock that is not held.
    error StakeManagerNoOpenChallenge(address node);

    /// @notice Adds `amount` (pulled from the caller with transferFrom) to `node`'s active stake.
    function stake(address node, uint256 amount) external;

    /// @notice As `stake`, approving through the token's EIP-2612 permit in the same call.
    function stakeWithPermit(address node, uint256 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external;

    /// @notice Moves `amount` of active stake into the node's single unbonding entry; the whole entry
    /// releases `unbondingPeriod` from now. Only the node's owner.
    function requestUnstake(address node, uint256 amount) external;

    /// @notice Pays the released unbonding stake of `node` to its owner. Only the owner, after `releaseAt`,
    /// and only while no challenge is open against the node.
    function withdraw(address node) external;

    /// @notice Slashes up to `amount` of `node`'s stake (active first, then unbonding), pays the challenger's
    /// share to `challenger` and the rest to the treasury. Only SLASHER_ROLE (the TaskLedger).
    /// @return slashed the amount actually slashed (capped at the slashable stake)
    function slash(address node, uint256 amount, address challenger) external returns (uint256 slashed);

    /// @notice Records that a challenge was opened against `node`'s work (blocks withdrawals). Only SLASHER_ROLE.
    function challengeOpened(address node) external;

    /// @notice Records that a challenge against `node`'s work was resolved. Only SLASHER_ROLE.
    function challengeClosed(address node) external;

    /// @notice Records that a challenge against `node`'s work was resolved and, when `slashAmount` is not 0,
    /// slashes min(slashAmount, the workers' minimum stake) from it, all to the treasury (no challenger share:
    /// a challenger friendly to the worker must not win part of the slash back). Only SLASHER_ROLE (the
    /// ledger's resolve: one call instead of three).
    /// @return slashed the amount slashed
    /// @return treasury_ the treasury (where the ledger sends a forfeited bond)
    function closeChallenge(address node, uint256 slashAmount) external returns (uint256 slashed, address treasury_);

    /// @notice Raises the floor the unbonding period must exceed to `floor` (if higher) and checks the current
    /// period exceeds it. Only SLASHER_ROLE (the ledger, at pool creation, with window + vote period).
    function raiseUnbondingFloor(uint256 floor) external;

    /// @notice Re-reads `node`'s role and status and updates its validator weight. Only the node registry
    /// (on every registration and exit).
    function nodeChanged(address node) external;

    /// @notice Moves `oldNode`'s whole stake record (active, unbonding and its release time, open challenge locks)
    /// and validator weight to `newNode`, which the registry guarantees was never registered (so holds none).
    /// Only the node registry (on `rotateKey`). Later slashes and challenge locks of `oldNode` apply to the key
    /// it was rotated into (`INodeRegistry.currentKey`).
    function nodeRotated(address oldNode, address newNode) external;

    /// @notice Sets the minimum active stake for `role`. Only the admin.
    function setMinStake(INodeRegistry.Role role, uint256 amount) external;

    /// @notice Sets the unbonding period; it must exceed the floor. Only the admin.
    function setUnbondingPeriod(uint256 period) external;

    /// @notice Sets the challenger's share of slashed funds in basis points. Only the admin.
    function setChallengerShareBps(uint256 bps) external;

    /// @notice Sets the treasury receiving the rest of slashes and forfeited bonds. Only the admin.
    function setTreasury(address treasury) external;

    /// @notice Stake record of `node`.
    function stakeOf(address node) external view returns (StakeInfo memory);

    /// @notice Active stake of `node`.
    function activeStake(address node) external view returns (uint256);

    /// @notice Whether `node` is an active node of `role` in the registry with at least the role's minimum
    /// active stake (what the ledger asks before a claim, a challenge or a vote: one call, one contract).
    function isEligible(address node, INodeRegistry.Role role) external view returns (bool);

    /// @notice Whether `node`'s active stake is at least the minimum of `role`.
    function hasMinStake(address node, INodeRegistry.Role role) external view returns (bool);

    /// @notice Minimum active stake of `role`.
    function minStake(INodeRegistry.Role role) external view returns (uint256);

    /// @notice Seconds between `requestUnstake` and the release.
    function unbondingPeriod() external view returns (uint256);

    /// @notice The unbonding period must stay above this (the longest pool window + vote period).
    function unbondingFloor() external view returns (uint256);

    /// @notice Challenger's share of a slash in basis points.
    function challengerShareBps() external view returns (uint256);

    /// @notice Receiver of the non-challenger part of slashes and of forfeited bonds.
    function treasury() external view returns (address);

    /// @notice Current validator weight of `node` (its active stake while an active validator, else 0).
    function validatorWeight(address node) external view returns (uint256);

    /// @notice Validator weight of `node` at the end of block `blockNumber` (a past block).
    function validatorWeightAt(address node, uint256 blockNumber) external view returns (uint256);

    /// @notice Current sum of all validator weights.
    function totalValidatorWeight() external view returns (uint256);

    /// @notice Sum of all validator weights at the end of block `blockNumber` (a past block).
    function totalValidatorWeightAt(uint256 blockNumber) external view returns (uint256);

    /// @notice Sum of all nodes' active and unbonding stake held by this contract.
    function totalStaked() external view returns (uint256);
}
