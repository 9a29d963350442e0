// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";

/// @title StakeManager
/// @notice Holds node stake. One aggregated unbonding entry per node keeps `withdraw` O(1) however many
/// times a node unbonded (no list of past unbonds to walk). Every stake move, slashes included, goes
/// through `_updateStake`, which writes and emits StakeUpdated and then re-derives the node's validator weight
/// (`_syncWeight`, the one path by which weights change; checkpointed by block number for the ledger's votes).
contract StakeManager is AccessControl, ReentrancyGuardTransient, IStakeManager {
    using SafeERC20 for IERC20;
    using Checkpoints for Checkpoints.Trace208;

    /// @notice Role of the TaskLedger: slashes, holds challenge locks, raises the unbonding floor.
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");

    uint256 private constant _BPS = 10_000;

    IERC20 public immutable stakeToken;
    INodeRegistry public immutable registry;

    // Storage form of a node's stake: the hot fields (active stake, role, status) share one slot so that
    // isEligible costs one read of it; 112 bits hold 5.2e15 tokens of 18 decimals (SafeCast checks).
    // 112 + 112 + 8 + 8 = 240 bits, then 64 + 32 = 96 bits. `stakeOf` returns it as an IStakeManager.StakeInfo.
    struct Stake {
        uint112 active;
        uint112 unbonding;
        INodeRegistry.Role role;
        INodeRegistry.Status status;
        uint64 releaseAt;
        uint32 openChallenges;
    }

    mapping(address node => Stake) private _stakes;
    mapping(INodeRegistry.Role role => uint256) private _minStake;
    uint256 private _unbondingPeriod;
    uint256 private _unbondingFloor;
    uint256 private _challengerShareBps;
    address private _treasury;
    uint256 private _totalStaked;
    mapping(address node => Checkpoints.Trace208) private _weights;
    Checkpoints.Trace208 private _totalWeight;

    /// @param admin receives DEFAULT_ADMIN_ROLE
    /// @param token_ the stake token
    /// @param registry_ the node registry
    /// @param treasury_ receiver of slashes (less the challenger share) and forfeited bonds
    /// @param unbondingPeriod_ seconds between requestUnstake and withdraw
    /// @param challengerShareBps_ challenger's share of a slash in basis points
    constructor(
        address admin,
        IERC20 token_,
        INodeRegistry registry_,
        address treasury_,
        uint256 unbondingPeriod_,
        uint256 challengerShareBps_
    ) {
        if (admin == address(0) || address(token_) == address(0) || address(registry_) == address(0)) {
            revert StakeManagerZeroAddress();
        }
        stakeToken = token_;
        registry = registry_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setTreasury(treasury_);
        _setUnbondingPeriod(unbondingPeriod_);
        _setChallengerShareBps(challengerShareBps_);
    }

    /// @inheritdoc IStakeManager
    function stake(address node, uint256 amount) external nonReentrant {
        _stake(node, amount);
    }

    /// @inheritdoc IStakeManager
    function stakeWithPermit(address node, uint256 amount, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
        nonReentrant
    {
        // A front-run permit (same signature used first by someone else) leaves the allowance in place:
        // ignore its failure and let transferFrom decide.
        try IERC20Permit(address(stakeToken)).permit(msg.sender, address(this), amount, deadline, v, r, s) {} catch {}
        _stake(node, amount);
    }

    /// @inheritdoc IStakeManager
    function requestUnstake(address node, uint256 amount) external {
        _onlyOwner(node);
        if (amount == 0) revert StakeManagerZeroAmount();
        Stake memory info = _stakes[node];
        if (amount > info.active) revert StakeManagerInsufficientStake(node, info.active, amount);
        // amount <= active, and unbonding + amount <= total staked fits 112 bits as active did
        info.active -= uint112(amount);
        info.unbonding += uint112(amount);
        info.releaseAt = uint64(block.timestamp + _unbondingPeriod);
        _updateStake(node, info);
        emit UnstakeRequested(node, amount, info.unbonding, info.releaseAt);
    }

    /// @inheritdoc IStakeManager
    function withdraw(address node) external nonReentrant {
        address owner = _onlyOwner(node);
        Stake memory info = _stakes[node];
        if (info.unbonding == 0) revert StakeManagerNothingToWithdraw(node);
        if (block.timestamp < info.releaseAt) revert StakeManagerStillUnbonding(node, info.releaseAt);
        if (info.openChallenges != 0) revert StakeManagerOpenChallenges(node, info.openChallenges);
        uint256 amount = info.unbonding;
        info.unbonding = 0;
        info.releaseAt = 0;
        _updateStake(node, info);
        _totalStaked -= amount;
        emit Withdrawn(node, owner, amount);
        stakeToken.safeTransfer(owner, amount);
    }

    /// @inheritdoc IStakeManager
    function slash(address node, uint256 amount, address challenger)
        external
        onlyRole(SLASHER_ROLE)
        nonReentrant
        returns (uint256 slashed)
    {
        slashed = _slash(_live(node), amount, challenger);
    }

    /// @inheritdoc IStakeManager
    function closeChallenge(address node, uint256 slashAmount)
        external
        onlyRole(SLASHER_ROLE)
        nonReentrant
        returns (uint256 slashed, address treasury_)
    {
        node = _live(node);
        _closeChallenge(node);
        if (slashAmount != 0) {
            // never more than the workers' minimum stake, even if the admin lowered it after the pool was made;
            // no challenger share: the whole slash goes to the treasury (issue 33)
            uint256 cap = _minStake[INodeRegistry.Role.Worker];
            slashed = _slash(node, slashAmount < cap ? slashAmount : cap, address(0));
        }
        treasury_ = _treasury;
    }

    /// @inheritdoc IStakeManager
    function challengeOpened(address node) external onlyRole(SLASHER_ROLE) {
        node = _live(node);
        uint32 count = _stakes[node].openChallenges + 1;
        _stakes[node].openChallenges = count;
        emit ChallengeLockUpdated(node, count);
    }

    /// @inheritdoc IStakeManager
    function challengeClosed(address node) external onlyRole(SLASHER_ROLE) {
        _closeChallenge(_live(node));
    }

    function _slash(address node, uint256 amount, address challenger) private returns (uint256 slashed) {
        Stake memory info = _stakes[node];
        uint256 slashable = uint256(info.active) + info.unbonding;
        slashed = amount < slashable ? amount : slashable;
        if (slashed == 0) return 0;
        // Taken from active first, then from unbonding; slashed <= active + unbonding.
        if (slashed <= info.active) {
            info.active -= uint112(slashed);
        } else {
            info.unbonding -= uint112(slashed - info.active);
            info.active = 0;
        }
        if (info.unbonding == 0) info.releaseAt = 0;
        _updateStake(node, info);
        _totalStaked -= slashed;

        uint256 challengerReward = challenger == address(0) ? 0 : (slashed * _challengerShareBps) / _BPS;
        uint256 treasuryAmount = slashed - challengerReward;
        emit Slashed(node, challenger, slashed, challengerReward, treasuryAmount);
        if (challengerReward != 0) stakeToken.safeTransfer(challenger, challengerReward);
        if (treasuryAmount != 0) stakeToken.safeTransfer(_treasury, treasuryAmount);
    }

    function _closeChallenge(address node) private {
        uint32 count = _stakes[node].openChallenges;
        if (count == 0) revert StakeManagerNoOpenChallenge(node);
        // count > 0 checked above
        unchecked {
            count -= 1;
        }
        _stakes[node].openChallenges = count;
        emit ChallengeLockUpdated(node, count);
    }

    /// @inheritdoc IStakeManager
    function raiseUnbondingFloor(uint256 floor) external onlyRole(SLASHER_ROLE) {
        if (floor > _unbondingFloor) {
            _unbondingFloor = floor;
            emit UnbondingFloorRaised(floor);
        }
        if (_unbondingPeriod <= _unbondingFloor) revert StakeManagerUnbondingTooShort(_unbondingPeriod, _unbondingFloor);
    }

    /// @inheritdoc IStakeManager
    function nodeChanged(address node) external {
        if (msg.sender != address(registry)) revert StakeManagerNotRegistry(msg.sender);
        Stake memory info = _stakes[node];
        (, info.role, info.status) = registry.nodeCore(node);
        _updateStake(node, info);
    }

    /// @inheritdoc IStakeManager
    function nodeRotated(address oldNode, address newNode) external {
        if (msg.sender != address(registry)) revert StakeManagerNotRegistry(msg.sender);
        Stake memory moved = _stakes[oldNode];
        // the old key keeps its role and nothing else; zeroed first so the validator total never counts both
        _updateStake(
            oldNode,
            Stake({
                active: 0,
                unbonding: 0,
                role: moved.role,
                status: INodeRegistry.Status.Rotated,
                releaseAt: 0,
                openChallenges: 0
            })
        );
        moved.status = INodeRegistry.Status.Active; // the registry rotates active nodes only
        _updateStake(newNode, moved);
        emit StakeMoved(oldNode, newNode, moved.active, moved.unbonding, moved.openChallenges);
    }

    /// @inheritdoc IStakeManager
    function setMinStake(INodeRegistry.Role role, uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _minStake[role] = amount;
        emit MinStakeSet(role, amount);
    }

    /// @inheritdoc IStakeManager
    function setUnbondingPeriod(uint256 period) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setUnbondingPeriod(period);
    }

    /// @inheritdoc IStakeManager
    function setChallengerShareBps(uint256 bps) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setChallengerShareBps(bps);
    }

    /// @inheritdoc IStakeManager
    function setTreasury(address treasury_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setTreasury(treasury_);
    }

    /// @inheritdoc IStakeManager
    function stakeOf(address node) external view returns (StakeInfo memory) {
        Stake memory info = _stakes[node];
        return StakeInfo({
            active: info.active,
            unbonding: info.unbonding,
            releaseAt: info.releaseAt,
            openChallenges: info.openChallenges,
            role: info.role,
            status: info.status
        });
    }

    /// @inheritdoc IStakeManager
    function activeStake(address node) external view returns (uint256) {
        return _stakes[node].active;
    }

    /// @inheritdoc IStakeManager
    function isEligible(address node, INodeRegistry.Role role) external view returns (bool) {
        Stake storage info = _stakes[node];
        return info.status == INodeRegistry.Status.Active && info.role == role && info.active >= _minStake[role];
    }

    /// @inheritdoc IStakeManager
    function hasMinStake(address node, INodeRegistry.Role role) external view returns (bool) {
        return _stakes[node].active >= _minStake[role];
    }

    /// @inheritdoc IStakeManager
    function minStake(INodeRegistry.Role role) external view returns (uint256) {
        return _minStake[role];
    }

    /// @inheritdoc IStakeManager
    function unbondingPeriod() external view returns (uint256) {
        return _unbondingPeriod;
    }

    /// @inheritdoc IStakeManager
    function unbondingFloor() external view returns (uint256) {
        return _unbondingFloor;
    }

    /// @inheritdoc IStakeManager
    function challengerShareBps() external view returns (uint256) {
        return _challengerShareBps;
    }

    /// @inheritdoc IStakeManager
    function treasury() external view returns (address) {
        return _treasury;
    }

    /// @inheritdoc IStakeManager
    function totalStaked() external view returns (uint256) {
        return _totalStaked;
    }

    /// @inheritdoc IStakeManager
    function validatorWeight(address node) external view returns (uint256) {
        return _weights[node].latest();
    }

    /// @inheritdoc IStakeManager
    function validatorWeightAt(address node, uint256 blockNumber) external view returns (uint256) {
        return _weights[node].upperLookupRecent(_pastBlock(blockNumber));
    }

    /// @inheritdoc IStakeManager
    function totalValidatorWeight() external view returns (uint256) {
        return _totalWeight.latest();
    }

    /// @inheritdoc IStakeManager
    function totalValidatorWeightAt(uint256 blockNumber) external view returns (uint256) {
        return _totalWeight.upperLookupRecent(_pastBlock(blockNumber));
    }

    function _stake(address node, uint256 amount) private {
        if (amount == 0) revert StakeManagerZeroAmount();
        Stake memory info = _stakes[node];
        if (info.status != INodeRegistry.Status.Active) revert StakeManagerNodeNotActive(node);
        info.active += SafeCast.toUint112(amount); // checked: reverts past 2**112 - 1
        _updateStake(node, info);
        _totalStaked += amount;
        emit Staked(node, msg.sender, amount);
        stakeToken.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @dev The one path by which a node's stake changes; emits StakeUpdated, then syncs its validator weight.
    function _updateStake(address node, Stake memory info) private {
        _stakes[node] = info;
        emit StakeUpdated(node, info.active, info.unbonding, info.releaseAt);
        _syncWeight(node, info);
    }

    /// @dev The one path by which validator weights change: weight = active stake while `node` is an active
    /// validator (role and status as the registry's hook last told), else 0; checkpointed at this block for
    /// the node and in the total. No-op when unchanged (a worker's stake moves cost one storage read here).
    function _syncWeight(address node, Stake memory info) private {
        uint256 weight = info.role == INodeRegistry.Role.Validator && info.status == INodeRegistry.Status.Active
            ? info.active
            : 0;
        uint256 old = _weights[node].latest();
        if (weight == old) return;
        uint48 key = SafeCast.toUint48(block.number);
        // the total is the sum of the nodes' latest weights, and it includes `old`
        uint256 total = _totalWeight.latest() - old + weight;
        _weights[node].push(key, SafeCast.toUint208(weight));
        _totalWeight.push(key, SafeCast.toUint208(total));
        emit ValidatorWeightUpdated(node, weight, total);
    }

    /// @dev A block whose end state is final (before the current one), as a checkpoint key.
    function _pastBlock(uint256 blockNumber) private view returns (uint48) {
        if (blockNumber >= block.number) revert StakeManagerFutureLookup(blockNumber, block.number);
        return uint48(blockNumber); // < block.number, which fits 48 bits for the next ~9e15 years of blocks
    }

    /// @dev The key that holds `node`'s stake now: `node`, or, once it was rotated away, the key it moved to (so a
    /// slash or challenge lock of a retired key's work follows the stake). Costs a read of the key's status slot;
    /// the registry is asked only for a retired key.
    function _live(address node) private view returns (address) {
        return _stakes[node].status == INodeRegistry.Status.Rotated ? registry.currentKey(node) : node;
    }

    function _onlyOwner(address node) private view returns (address owner) {
        owner = registry.ownerOf(node);
        if (owner != msg.sender || owner == address(0)) revert StakeManagerNotOwner(node, msg.sender);
    }

    function _setUnbondingPeriod(uint256 period) private {
        if (period <= _unbondingFloor || period > type(uint32).max) {
            revert StakeManagerUnbondingTooShort(period, _unbondingFloor);
        }
        _unbondingPeriod = period;
        emit UnbondingPeriodSet(period);
    }

    function _setChallengerShareBps(uint256 bps) private {
        if (bps > _BPS) revert StakeManagerInvalidShare(bps);
        _challengerShareBps = bps;
        emit ChallengerShareSet(bps);
    }

    function _setTreasury(address treasury_) private {
        if (treasury_ == address(0)) revert StakeManagerZeroAddress();
        _treasury = treasury_;
        emit TreasurySet(treasury_);
    }
}
