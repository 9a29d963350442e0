// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";

/// @title StakeManager
/// @notice Holds node stake. One aggregated unbonding entry per node keeps `withdraw` O(1) however many
/// times a node unbonded (no list of past unbonds to walk). Every stake move, slashes included, goes
/// through `_updateStake`, which writes and emits StakeUpdated.
contract StakeManager is AccessControl, ReentrancyGuardTransient, IStakeManager {
    using SafeERC20 for IERC20;

    /// @notice Role of the TaskLedger: slashes, holds challenge locks, raises the unbonding floor.
    bytes32 public constant SLASHER_ROLE = keccak256("SLASHER_ROLE");

    uint256 private constant _BPS = 10_000;

    IERC20 public immutable stakeToken;
    INodeRegistry public immutable registry;

    mapping(address node => StakeInfo) private _stakes;
    mapping(INodeRegistry.Role role => uint256) private _minStake;
    uint256 private _unbondingPeriod;
    uint256 private _unbondingFloor;
    uint256 private _challengerShareBps;
    address private _treasury;
    uint256 private _totalStaked;

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
        StakeInfo memory info = _stakes[node];
        if (amount > info.active) revert StakeManagerInsufficientStake(node, info.active, amount);
        // amount <= active, and unbonding + amount <= total staked fits uint128 as active did
        info.active -= uint128(amount);
        info.unbonding += uint128(amount);
        info.releaseAt = uint64(block.timestamp + _unbondingPeriod);
        _updateStake(node, info);
        emit UnstakeRequested(node, amount, info.unbonding, info.releaseAt);
    }

    /// @inheritdoc IStakeManager
    function withdraw(address node) external nonReentrant {
        address owner = _onlyOwner(node);
        StakeInfo memory info = _stakes[node];
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
        StakeInfo memory info = _stakes[node];
        uint256 slashable = uint256(info.active) + info.unbonding;
        slashed = amount < slashable ? amount : slashable;
        if (slashed == 0) return 0;
        // Taken from active first, then from unbonding; slashed <= active + unbonding.
        if (slashed <= info.active) {
            info.active -= uint128(slashed);
        } else {
            info.unbonding -= uint128(slashed - info.active);
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

    /// @inheritdoc IStakeManager
    function challengeOpened(address node) external onlyRole(SLASHER_ROLE) {
        uint32 count = _stakes[node].openChallenges + 1;
        _stakes[node].openChallenges = count;
        emit ChallengeLockUpdated(node, count);
    }

    /// @inheritdoc IStakeManager
    function challengeClosed(address node) external onlyRole(SLASHER_ROLE) {
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
        return _stakes[node];
    }

    /// @inheritdoc IStakeManager
    function activeStake(address node) external view returns (uint256) {
        return _stakes[node].active;
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

    function _stake(address node, uint256 amount) private {
        if (amount == 0) revert StakeManagerZeroAmount();
        (,, INodeRegistry.Status status) = registry.nodeCore(node);
        if (status != INodeRegistry.Status.Active) revert StakeManagerNodeNotActive(node);
        StakeInfo memory info = _stakes[node];
        info.active += SafeCast.toUint128(amount); // checked: reverts past 2**128 - 1
        _updateStake(node, info);
        _totalStaked += amount;
        emit Staked(node, msg.sender, amount);
        stakeToken.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @dev The one path by which a node's stake changes; emits StakeUpdated.
    function _updateStake(address node, StakeInfo memory info) private {
        _stakes[node] = info;
        emit StakeUpdated(node, info.active, info.unbonding, info.releaseAt);
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
