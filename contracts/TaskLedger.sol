// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {ITaskLedger} from "./interfaces/ITaskLedger.sol";

/// @title TaskLedger
/// @notice Pools, checkpoints, task leases, work submissions with challenge windows, challenges, votes,
/// resolution and reward claims (see ITaskLedger for the rules).
///
/// Gas layout: a task is one slot (node, lease expiry, pool, status) and its submission one more slot
/// (reward, window end, slash epoch); CIDs and proof hashes live in event logs only. The pool fields that
/// claimTask/submitWork read share one slot, the escrow counters another. No call loops over an unbounded set.
contract TaskLedger is AccessControl, ReentrancyGuardTransient, ITaskLedger {
    using SafeERC20 for IERC20;

    /// @dev latestStep while a pool has no checkpoint; steps must stay below it.
    uint48 private constant _NO_CHECKPOINT = type(uint48).max;

    // slot 0 is all that claimTask and submitWork read of a pool; 96+48+32+32+32+16 = 256 bits.
    struct PoolHot {
        uint96 rewardPerUnit;
        uint48 latestStep;
        uint32 windowLength;
        uint32 leaseDuration;
        uint32 maxUnits;
        uint16 asyncLevel;
    }

    // the rest of a pool, read by challenge/resolve/publishCheckpoint.
    struct PoolCold {
        address trainer;
        uint32 votePeriod;
        uint16 quorum;
        address owner;
        uint128 challengeBond;
        uint128 slashAmount;
    }

    // escrow of a pool in one slot: submitWork and claimRewards move tokens between the two halves.
    struct PoolFunds {
        uint128 budget;
        uint128 reserved;
    }

    // 160 + 40 + 32 + 8 = 240 bits
    struct Task {
        address node;
        uint40 leaseExpiry;
        uint32 poolId;
        TaskStatus status;
    }

    // 128 + 40 + 32 = 200 bits
    struct Submission {
        uint128 reward;
        uint40 windowEnd;
        uint32 slashEpoch;
    }

    // 160 + 40 + 16 + 16 + 8 = 240 bits
    struct Challenge {
        address challenger;
        uint40 voteEnd;
        uint16 votesFor;
        uint16 votesAgainst;
        ChallengeStatus status;
    }

    IERC20 private immutable _token;
    INodeRegistry private immutable _registry;
    IStakeManager private immutable _stakeManager;

    mapping(uint32 poolId => PoolHot) private _poolHot;
    mapping(uint32 poolId => PoolCold) private _poolCold;
    mapping(uint32 poolId => PoolFunds) private _funds;
    mapping(uint32 poolId => string) private _taskSetCid;
    mapping(uint32 poolId => mapping(uint256 step => string)) private _checkpoints;
    mapping(uint256 taskId => Task) private _tasks;
    mapping(uint256 submissionId => Submission) private _submissions;
    mapping(uint256 challengeId => Challenge) private _challenges;
    mapping(uint256 challengeId => mapping(address validator => bool)) private _voted;
    mapping(address node => uint32) private _slashEpoch;

    uint32 private _poolCount;
    uint32 private _minWindowLength;
    // starts at 1 so that the first claim writes nonzero -> nonzero (cheaper) and id 0 stays "none"
    uint256 private _nextTaskId = 1;

    /// @param admin receives DEFAULT_ADMIN_ROLE (sets the minimum window length)
    /// @param token_ the reward and bond token
    /// @param registry_ the node registry
    /// @param stakeManager_ the stake manager (this ledger needs its SLASHER_ROLE)
    /// @param minWindowLength_ shortest allowed pool window in seconds (24 h on public networks)
    constructor(
        address admin,
        IERC20 token_,
        INodeRegistry registry_,
        IStakeManager stakeManager_,
        uint32 minWindowLength_
    ) {
        if (
            admin == address(0) || address(token_) == address(0) || address(registry_) == address(0)
                || address(stakeManager_) == address(0)
        ) revert TaskLedgerInvalidPoolParam("constructor address");
        _token = token_;
        _registry = registry_;
        _stakeManager = stakeManager_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setMinWindowLength(minWindowLength_);
    }

    // ------------------------------------------------------------------ pools and checkpoints

    /// @inheritdoc ITaskLedger
    function createPool(PoolParams calldata params) external returns (uint32 poolId) {
        if (params.trainer == address(0)) revert TaskLedgerInvalidPoolParam("trainer");
        if (bytes(params.taskSetCid).length == 0) revert TaskLedgerInvalidPoolParam("taskSetCid");
        if (params.rewardPerUnit == 0) revert TaskLedgerInvalidPoolParam("rewardPerUnit");
        if (params.challengeBond == 0) revert TaskLedgerInvalidPoolParam("challengeBond");
        if (params.votePeriod == 0) revert TaskLedgerInvalidPoolParam("votePeriod");
        if (params.leaseDuration == 0) revert TaskLedgerInvalidPoolParam("leaseDuration");
        if (params.maxUnitsPerSubmission == 0) revert TaskLedgerInvalidPoolParam("maxUnitsPerSubmission");
        if (params.quorum == 0) revert TaskLedgerInvalidPoolParam("quorum");
        if (params.windowLength < _minWindowLength) {
            revert TaskLedgerWindowTooShort(params.windowLength, _minWindowLength);
        }
        // A worker may unbond right after claiming: its stake must outlive lease + window + vote period.
        uint256 exposure = uint256(params.leaseDuration) + params.windowLength + params.votePeriod;
        uint256 unbonding = _stakeManager.unbondingPeriod();
        if (unbonding <= exposure) revert TaskLedgerUnbondingTooShort(exposure, unbonding);

        poolId = ++_poolCount;
        _poolHot[poolId] = PoolHot({
            rewardPerUnit: params.rewardPerUnit,
            latestStep: _NO_CHECKPOINT,
            windowLength: params.windowLength,
            leaseDuration: params.leaseDuration,
            maxUnits: params.maxUnitsPerSubmission,
            asyncLevel: params.asyncLevel
        });
        _poolCold[poolId] = PoolCold({
            trainer: params.trainer,
            votePeriod: params.votePeriod,
            quorum: params.quorum,
            owner: msg.sender,
            challengeBond: params.challengeBond,
            slashAmount: params.slashAmount
        });
        _taskSetCid[poolId] = params.taskSetCid;
        emit PoolCreated(poolId, msg.sender, params.trainer, params);
        // keeps the admin from later shortening the unbonding period below this pool's exposure
        _stakeManager.raiseUnbondingFloor(exposure);
    }

    /// @inheritdoc ITaskLedger
    function fundPool(uint32 poolId, uint256 amount) external nonReentrant {
        _requirePool(poolId);
        if (amount == 0) revert TaskLedgerZeroAmount();
        PoolFunds memory funds = _funds[poolId];
        funds.budget += SafeCast.toUint128(amount);
        _funds[poolId] = funds;
        emit PoolFunded(poolId, msg.sender, amount, funds.budget);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc ITaskLedger
    function defundPool(uint32 poolId, uint256 amount, address to) external nonReentrant {
        _requirePool(poolId);
        if (_poolCold[poolId].owner != msg.sender) revert TaskLedgerNotPoolOwner(poolId, msg.sender);
        if (amount == 0) revert TaskLedgerZeroAmount();
        if (to == address(0)) revert TaskLedgerInvalidPoolParam("to");
        PoolFunds memory funds = _funds[poolId];
        if (amount > funds.budget) revert TaskLedgerInsufficientBudget(poolId, funds.budget, amount);
        funds.budget -= uint128(amount); // amount <= budget < 2**128
        _funds[poolId] = funds;
        emit PoolDefunded(poolId, to, amount, funds.budget);
        _token.safeTransfer(to, amount);
    }

    /// @inheritdoc ITaskLedger
    function publishCheckpoint(uint32 poolId, uint256 step, string calldata manifestCid) external {
        PoolHot storage hot = _requirePool(poolId);
        if (_poolCold[poolId].trainer != msg.sender) revert TaskLedgerNotTrainer(poolId, msg.sender);
        if (step >= _NO_CHECKPOINT) revert TaskLedgerStepTooLarge(step);
        if (bytes(manifestCid).length == 0) revert TaskLedgerInvalidPoolParam("manifestCid");
        uint48 latest = hot.latestStep;
        if (latest != _NO_CHECKPOINT && step <= latest) revert TaskLedgerStepNotIncreasing(poolId, step, latest);
        hot.latestStep = uint48(step);
        _checkpoints[poolId][step] = manifestCid;
        emit CheckpointPublished(poolId, step, manifestCid);
    }

    // ------------------------------------------------------------------ tasks and submissions

    /// @inheritdoc ITaskLedger
    function claimTask(uint32 poolId) external returns (uint256 taskId) {
        PoolHot memory hot = _poolHot[poolId];
        if (hot.windowLength == 0) revert TaskLedgerUnknownPool(poolId);
        if (hot.latestStep == _NO_CHECKPOINT) revert TaskLedgerNoCheckpoint(poolId);
        _requireEligible(msg.sender, INodeRegistry.Role.Worker);

        taskId = _nextTaskId;
        // a uint256 counter incremented by one per transaction cannot overflow
        unchecked {
            _nextTaskId = taskId + 1;
        }
        uint40 leaseExpiry = uint40(block.timestamp + hot.leaseDuration);
        _tasks[taskId] = Task({node: msg.sender, leaseExpiry: leaseExpiry, poolId: poolId, status: TaskStatus.Claimed});
        // Not stored: validators read it from the event. prevrandao is fixed by the block's proposer, not by
        // the worker; the previous block hash and the task id make each claim's seed distinct.
        bytes32 seed = keccak256(abi.encode(block.prevrandao, blockhash(block.number - 1), msg.sender, taskId));
        emit TaskClaimed(taskId, poolId, msg.sender, seed, leaseExpiry);
    }

    /// @inheritdoc ITaskLedger
    function submitWork(
        uint256 taskId,
        string calldata rolloutsCid,
        bytes32 proofsHash,
        uint32 workUnits,
        uint256 policyStep
    ) external {
        Task memory t = _tasks[taskId];
        if (t.node != msg.sender) {
            if (t.status == TaskStatus.None) revert TaskLedgerUnknownTask(taskId);
            revert TaskLedgerNotClaimant(taskId, msg.sender);
        }
        if (t.status != TaskStatus.Claimed) revert TaskLedgerInvalidStatus(taskId, t.status);
        if (block.timestamp > t.leaseExpiry) revert TaskLedgerLeaseExpired(taskId, t.leaseExpiry);

        PoolHot memory hot = _poolHot[t.poolId];
        if (workUnits == 0 || workUnits > hot.maxUnits) revert TaskLedgerInvalidWorkUnits(workUnits, hot.maxUnits);
        _checkPolicyStep(policyStep, hot.latestStep, hot.asyncLevel);

        // workUnits < 2**32 and rewardPerUnit < 2**96: the product fits in 128 bits
        uint128 reward = uint128(workUnits) * hot.rewardPerUnit;
        PoolFunds memory funds = _funds[t.poolId];
        if (funds.budget < reward) revert TaskLedgerInsufficientBudget(t.poolId, funds.budget, reward);
        // budget >= reward, and reserved + reward <= total escrow < 2**128
        unchecked {
            funds.budget -= reward;
            funds.reserved += reward;
        }
        _funds[t.poolId] = funds;

        uint40 windowEnd = uint40(block.timestamp + hot.windowLength);
        t.status = TaskStatus.Submitted;
        _tasks[taskId] = t;
        _submissions[taskId] = Submission({reward: reward, windowEnd: windowEnd, slashEpoch: _slashEpoch[msg.sender]});
        emit WorkSubmitted(
            taskId, t.poolId, msg.sender, rolloutsCid, proofsHash, workUnits, policyStep, reward, windowEnd
        );
    }

    // ------------------------------------------------------------------ challenges

    /// @inheritdoc ITaskLedger
    function challenge(uint256 submissionId, string calldata evidenceCid)
        external
        nonReentrant
        returns (uint256 challengeId)
    {
        Task memory t = _tasks[submissionId];
        if (t.status == TaskStatus.None) revert TaskLedgerUnknownTask(submissionId);
        if (_challenges[submissionId].status != ChallengeStatus.None) revert TaskLedgerAlreadyChallenged(submissionId);
        if (t.status != TaskStatus.Submitted) revert TaskLedgerInvalidStatus(submissionId, t.status);
        uint40 windowEnd = _submissions[submissionId].windowEnd;
        if (block.timestamp >= windowEnd) revert TaskLedgerWindowClosed(submissionId, windowEnd);
        address validatorOwner = _requireEligible(msg.sender, INodeRegistry.Role.Validator);
        if (msg.sender == t.node || _registry.ownerOf(t.node) == validatorOwner) {
            revert TaskLedgerConflictOfInterest(submissionId, msg.sender);
        }

        PoolCold memory cold = _poolCold[t.poolId];
        uint40 voteEnd = uint40(block.timestamp + cold.votePeriod);
        challengeId = submissionId;
        _challenges[challengeId] = Challenge({
            challenger: msg.sender,
            voteEnd: voteEnd,
            votesFor: 1,
            votesAgainst: 0,
            status: ChallengeStatus.Open
        });
        t.status = TaskStatus.Challenged;
        _tasks[submissionId] = t;
        emit ChallengeOpened(challengeId, t.node, msg.sender, evidenceCid, voteEnd);
        _stakeManager.challengeOpened(t.node);
        _token.safeTransferFrom(msg.sender, address(this), cold.challengeBond);
    }

    /// @inheritdoc ITaskLedger
    function vote(uint256 challengeId, bool uphold) external {
        Challenge memory c = _openChallenge(challengeId);
        if (block.timestamp >= c.voteEnd) revert TaskLedgerVotePeriodOver(challengeId, c.voteEnd);
        address validatorOwner = _requireEligible(msg.sender, INodeRegistry.Role.Validator);
        if (msg.sender == c.challenger || _voted[challengeId][msg.sender]) {
            revert TaskLedgerAlreadyVoted(challengeId, msg.sender);
        }
        address worker = _tasks[challengeId].node;
        if (msg.sender == worker || _registry.ownerOf(worker) == validatorOwner) {
            revert TaskLedgerConflictOfInterest(challengeId, msg.sender);
        }
        _voted[challengeId][msg.sender] = true;
        if (uphold) c.votesFor += 1;
        else c.votesAgainst += 1;
        _challenges[challengeId] = c;
        emit VoteCast(challengeId, msg.sender, uphold, c.votesFor, c.votesAgainst);
    }

    /// @inheritdoc ITaskLedger
    function resolve(uint256 challengeId) external nonReentrant returns (bool upheld) {
        Challenge memory c = _openChallenge(challengeId);
        Task memory t = _tasks[challengeId];
        PoolCold memory cold = _poolCold[t.poolId];
        if (block.timestamp < c.voteEnd) {
            // Early only when one side holds more than half of all active validators: it cannot be overturned.
            uint256 validators = _registry.activeCount(INodeRegistry.Role.Validator);
            if (2 * uint256(c.votesFor) > validators && uint256(c.votesFor) + c.votesAgainst >= cold.quorum) {
                upheld = true;
            } else if (2 * uint256(c.votesAgainst) <= validators) {
                revert TaskLedgerVotePeriodActive(challengeId, c.voteEnd);
            }
        } else {
            upheld = c.votesFor > c.votesAgainst && uint256(c.votesFor) + c.votesAgainst >= cold.quorum;
        }

        c.status = upheld ? ChallengeStatus.Upheld : ChallengeStatus.Rejected;
        _challenges[challengeId] = c;
        t.status = upheld ? TaskStatus.Upheld : TaskStatus.Submitted;
        _tasks[challengeId] = t;
        uint256 slashed;
        if (upheld) {
            _release(t.poolId, _submissions[challengeId].reward);
            uint32 epoch = _slashEpoch[t.node] + 1;
            _slashEpoch[t.node] = epoch;
            emit WorkerWiped(t.node, epoch);
        }
        _stakeManager.challengeClosed(t.node);
        if (upheld) {
            slashed = _stakeManager.slash(t.node, cold.slashAmount, c.challenger);
            emit ChallengeResolved(challengeId, true, c.votesFor, c.votesAgainst, slashed);
            _token.safeTransfer(c.challenger, cold.challengeBond);
        } else {
            emit ChallengeResolved(challengeId, false, c.votesFor, c.votesAgainst, 0);
            _token.safeTransfer(_stakeManager.treasury(), cold.challengeBond);
        }
    }

    // ------------------------------------------------------------------ rewards

    /// @inheritdoc ITaskLedger
    function claimRewards(uint256[] calldata submissionIds) external nonReentrant returns (uint256 total) {
        uint256 n = submissionIds.length;
        if (n == 0) revert TaskLedgerEmptyBatch();
        address payee = address(0); // set from the first submission's owner
        address lastNode = address(0); // cache key for `owner` (one registry read per node, not per id)
        address owner = address(0);
        for (uint256 i; i < n; ++i) {
            uint256 id = submissionIds[i];
            Task memory t = _tasks[id];
            if (t.status != TaskStatus.Submitted) {
                if (t.status == TaskStatus.None) revert TaskLedgerUnknownTask(id);
                revert TaskLedgerInvalidStatus(id, t.status);
            }
            if (t.node != lastNode) {
                lastNode = t.node;
                owner = _registry.ownerOf(t.node);
            }
            if (msg.sender != t.node && msg.sender != owner) revert TaskLedgerNotNodeOrOwner(id, msg.sender);
            if (payee == address(0)) payee = owner;
            else if (owner != payee) revert TaskLedgerMixedOwners(id, owner, payee);
            Submission memory s = _submissions[id];
            if (block.timestamp < s.windowEnd) revert TaskLedgerWindowOpen(id, s.windowEnd);
            if (s.slashEpoch != _slashEpoch[t.node]) revert TaskLedgerSubmissionVoided(id);

            t.status = TaskStatus.Paid;
            _tasks[id] = t;
            PoolFunds storage funds = _funds[t.poolId];
            funds.reserved -= s.reward;
            total += s.reward;
            emit RewardClaimed(id, t.node, owner, s.reward);
        }
        _token.safeTransfer(payee, total);
    }

    /// @inheritdoc ITaskLedger
    function voidSubmissions(uint256[] calldata submissionIds) external returns (uint256 released) {
        uint256 n = submissionIds.length;
        if (n == 0) revert TaskLedgerEmptyBatch();
        for (uint256 i; i < n; ++i) {
            uint256 id = submissionIds[i];
            Task memory t = _tasks[id];
            if (t.status != TaskStatus.Submitted) {
                if (t.status == TaskStatus.None) revert TaskLedgerUnknownTask(id);
                revert TaskLedgerInvalidStatus(id, t.status);
            }
            Submission memory s = _submissions[id];
            if (s.slashEpoch == _slashEpoch[t.node]) revert TaskLedgerNotVoidable(id);
            t.status = TaskStatus.Voided;
            _tasks[id] = t;
            _release(t.poolId, s.reward);
            released += s.reward;
            emit SubmissionVoided(id, t.node, s.reward);
        }
    }

    // ------------------------------------------------------------------ admin

    /// @inheritdoc ITaskLedger
    function setMinWindowLength(uint32 minWindowLength_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinWindowLength(minWindowLength_);
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc ITaskLedger
    function pool(uint32 poolId) external view returns (PoolView memory view_) {
        PoolHot memory hot = _requirePool(poolId);
        PoolCold memory cold = _poolCold[poolId];
        PoolFunds memory funds = _funds[poolId];
        view_.owner = cold.owner;
        view_.params = PoolParams({
            trainer: cold.trainer,
            taskSetCid: _taskSetCid[poolId],
            rewardPerUnit: hot.rewardPerUnit,
            challengeBond: cold.challengeBond,
            slashAmount: cold.slashAmount,
            windowLength: hot.windowLength,
            votePeriod: cold.votePeriod,
            leaseDuration: hot.leaseDuration,
            maxUnitsPerSubmission: hot.maxUnits,
            asyncLevel: hot.asyncLevel,
            quorum: cold.quorum
        });
        view_.budget = funds.budget;
        view_.reserved = funds.reserved;
        view_.hasCheckpoint = hot.latestStep != _NO_CHECKPOINT;
        view_.latestStep = view_.hasCheckpoint ? hot.latestStep : 0;
    }

    /// @inheritdoc ITaskLedger
    function poolCount() external view returns (uint32) {
        return _poolCount;
    }

    /// @inheritdoc ITaskLedger
    function checkpoint(uint32 poolId, uint256 step) external view returns (string memory cid) {
        _requirePool(poolId);
        cid = _checkpoints[poolId][step];
        if (bytes(cid).length == 0) revert TaskLedgerUnknownCheckpoint(poolId, step);
    }

    /// @inheritdoc ITaskLedger
    function latestStep(uint32 poolId) external view returns (uint256) {
        uint48 latest = _requirePool(poolId).latestStep;
        if (latest == _NO_CHECKPOINT) revert TaskLedgerNoCheckpoint(poolId);
        return latest;
    }

    /// @inheritdoc ITaskLedger
    function task(uint256 taskId) external view returns (TaskView memory) {
        Task memory t = _tasks[taskId];
        if (t.status == TaskStatus.None) revert TaskLedgerUnknownTask(taskId);
        Submission memory s = _submissions[taskId];
        return TaskView({
            node: t.node,
            poolId: t.poolId,
            leaseExpiry: t.leaseExpiry,
            status: t.status,
            reward: s.reward,
            windowEnd: s.windowEnd,
            slashEpoch: s.slashEpoch
        });
    }

    /// @inheritdoc ITaskLedger
    function challengeInfo(uint256 challengeId) external view returns (ChallengeView memory) {
        Challenge memory c = _challenges[challengeId];
        if (c.status == ChallengeStatus.None) revert TaskLedgerUnknownChallenge(challengeId);
        return ChallengeView({
            challenger: c.challenger,
            voteEnd: c.voteEnd,
            votesFor: c.votesFor,
            votesAgainst: c.votesAgainst,
            status: c.status
        });
    }

    /// @inheritdoc ITaskLedger
    function hasVoted(uint256 challengeId, address validator) external view returns (bool) {
        Challenge storage c = _challenges[challengeId];
        return (c.status != ChallengeStatus.None && c.challenger == validator) || _voted[challengeId][validator];
    }

    /// @inheritdoc ITaskLedger
    function slashEpoch(address node) external view returns (uint32) {
        return _slashEpoch[node];
    }

    /// @inheritdoc ITaskLedger
    function claimable(uint256 submissionId) external view returns (uint256) {
        Task memory t = _tasks[submissionId];
        if (t.status != TaskStatus.Submitted) return 0;
        Submission memory s = _submissions[submissionId];
        if (block.timestamp < s.windowEnd || s.slashEpoch != _slashEpoch[t.node]) return 0;
        return s.reward;
    }

    /// @inheritdoc ITaskLedger
    function nextTaskId() external view returns (uint256) {
        return _nextTaskId;
    }

    /// @inheritdoc ITaskLedger
    function minWindowLength() external view returns (uint32) {
        return _minWindowLength;
    }

    /// @inheritdoc ITaskLedger
    function token() external view returns (address) {
        return address(_token);
    }

    /// @inheritdoc ITaskLedger
    function registry() external view returns (address) {
        return address(_registry);
    }

    /// @inheritdoc ITaskLedger
    function stakeManager() external view returns (address) {
        return address(_stakeManager);
    }

    // ------------------------------------------------------------------ internal

    function _requirePool(uint32 poolId) private view returns (PoolHot storage hot) {
        hot = _poolHot[poolId];
        // every pool has windowLength >= 1 (createPool enforces >= minWindowLength >= 1)
        if (hot.windowLength == 0) revert TaskLedgerUnknownPool(poolId);
    }

    /// @dev Active node of `role` with at least the role's minimum stake; returns its owner.
    function _requireEligible(address node, INodeRegistry.Role role) private view returns (address owner) {
        (address owner_, INodeRegistry.Role nodeRole, INodeRegistry.Status status) = _registry.nodeCore(node);
        if (status != INodeRegistry.Status.Active || nodeRole != role || !_stakeManager.hasMinStake(node, role)) {
            revert TaskLedgerNotEligible(node, uint8(role));
        }
        return owner_;
    }

    function _checkPolicyStep(uint256 policyStep, uint48 latest, uint16 asyncLevel) private pure {
        if (policyStep > latest) revert TaskLedgerFuturePolicyStep(policyStep, latest);
        uint256 minStep = latest > asyncLevel ? latest - asyncLevel : 0;
        if (policyStep < minStep) revert TaskLedgerStalePolicyStep(policyStep, minStep);
    }

    function _openChallenge(uint256 challengeId) private view returns (Challenge memory c) {
        c = _challenges[challengeId];
        if (c.status == ChallengeStatus.None) revert TaskLedgerUnknownChallenge(challengeId);
        if (c.status != ChallengeStatus.Open) revert TaskLedgerChallengeNotOpen(challengeId, c.status);
    }

    /// @dev Returns a submission's reservation to its pool's unreserved budget.
    function _release(uint32 poolId, uint128 amount) private {
        PoolFunds memory funds = _funds[poolId];
        funds.reserved -= amount;
        funds.budget += amount;
        _funds[poolId] = funds;
    }

    function _setMinWindowLength(uint32 minWindowLength_) private {
        if (minWindowLength_ == 0) revert TaskLedgerInvalidPoolParam("minWindowLength");
        _minWindowLength = minWindowLength_;
        emit MinWindowLengthSet(minWindowLength_);
    }
}
