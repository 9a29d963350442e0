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
import {PoolCold, PoolFunds, PoolHot, PoolRules} from "./libraries/PoolRules.sol";

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
    uint256 private constant _BPS = 10_000;
    /// @dev PoolHot.openUntil of a finished pool (PoolRules)
    uint32 private constant _FINISHED = 2;

    // the owner's announced defund: at most `amount`, from `at` + leaseDuration (issue 33)
    struct Defund {
        uint128 amount;
        uint40 at;
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

    // two slots: 160 + 40 + 32 + 8 + 16 = 256 bits (all that `challenge` reads and writes), then the votes of
    // the other validators, 96 + 96 + 16 + 16 = 224 bits, first written by a vote. The challenger's own uphold
    // vote is not stored: it is one vote of its weight at `snapshot`, read from the StakeManager when counted
    // (`_tally`), which keeps `challenge` to one new slot. Weights are stake in wei: 96 bits hold 7.9e10
    // tokens of 18 decimals, more than all validator stake (SafeCast checks). A 32-bit snapshot block lasts
    // 272 years of 2 s blocks (SafeCast checks). The electorate is the StakeManager's total validator weight
    // at `snapshot`, not stored either.
    struct Challenge {
        address challenger;
        uint40 voteEnd;
        uint32 snapshot;
        ChallengeStatus status;
        uint16 round;
        uint96 weightFor;
        uint96 weightAgainst;
        uint16 votesFor;
        uint16 votesAgainst;
    }

    IERC20 private immutable _token;
    INodeRegistry private immutable _registry;
    IStakeManager private immutable _stakeManager;

    mapping(uint32 poolId => PoolHot) private _poolHot;
    mapping(uint32 poolId => PoolCold) private _poolCold;
    mapping(uint32 poolId => PoolFunds) private _funds;
    mapping(uint32 poolId => string) private _rulesCid;
    mapping(uint32 poolId => mapping(uint256 step => string)) private _checkpoints;
    mapping(uint256 taskId => Task) private _tasks;
    mapping(uint256 submissionId => Submission) private _submissions;
    mapping(uint256 challengeId => Challenge) private _challenges;
    // round << 1 | uphold of the round a validator last voted in (voted in the current round iff the round
    // part equals the challenge's round); the side lets anyone prove a vote against the outcome (AttesterBook)
    mapping(uint256 challengeId => mapping(address validator => uint24 vote)) private _voted;
    mapping(address node => uint32) private _slashEpoch;
    // when each ended epoch of a node ended: its submissions whose window was open then are void
    mapping(address node => mapping(uint32 epoch => uint40)) private _wipedAt;
    // one slot per node and pool: reservations (per-node cap), open leases (cap), expired leases, claims
    // (never back to 0 after the first claim, so later claims write nonzero -> nonzero)
    mapping(address node => mapping(uint32 poolId => NodeBook)) private _books;
    mapping(uint32 poolId => Defund) private _defunds;

    uint32 private _poolCount;
    uint32 private _minWindowLength;
    uint16 private _minQuorum;
    uint128 private _minChallengeBond;
    // tokens of reservations per token of active stake a node may hold in a pool (0: no bound); same slot
    uint32 private _reservationLeverage;
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
        poolId = ++_poolCount;
        // writes the pool, checks its parameters (reverting undoes the writes) and emits PoolCreated
        uint256 exposure = PoolRules.create(
            _poolHot, _poolCold, _rulesCid, params, poolId, _minWindowLength, _minChallengeBond, _minQuorum, _stakeManager
        );
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
    function announceDefund(uint32 poolId, uint256 amount) external {
        uint256 lease = _requireOwner(poolId).leaseDuration;
        _defunds[poolId] = Defund({amount: SafeCast.toUint128(amount), at: uint40(block.timestamp)});
        emit PoolDefundAnnounced(poolId, amount, block.timestamp + lease);
    }

    /// @inheritdoc ITaskLedger
    function defundPool(uint32 poolId, uint256 amount, address to) external nonReentrant {
        uint256 lease = _requireOwner(poolId).leaseDuration;
        if (amount == 0) revert TaskLedgerZeroAmount();
        if (to == address(0)) _invalidParam("to");
        // every lease open when the defund was announced has ended (submitted: reserved; or expired) by then
        Defund memory d = _defunds[poolId];
        uint256 executableAt = uint256(d.at) + lease;
        if (d.at == 0 || block.timestamp < executableAt || amount > d.amount) {
            revert TaskLedgerDefundNotAnnounced(poolId, d.amount, executableAt);
        }
        _defunds[poolId].amount = d.amount - uint128(amount); // amount <= d.amount
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
        if (bytes(manifestCid).length == 0) _invalidParam("manifestCid");
        uint48 latest = hot.latestStep;
        if (latest != _NO_CHECKPOINT && step <= latest) revert TaskLedgerStepNotIncreasing(poolId, step, latest);
        hot.latestStep = uint48(step);
        // a heartbeat: an open pool whose trainer keeps one takes claims for another lease duration
        if (hot.openUntil > _FINISHED) hot.openUntil = uint32(block.timestamp + hot.leaseDuration);
        _checkpoints[poolId][step] = manifestCid;
        emit CheckpointPublished(poolId, step, manifestCid);
    }

    /// @inheritdoc ITaskLedger
    function setPoolState(uint32 poolId, PoolState state) external {
        PoolRules.setState(_poolHot, _poolCold, _funds, _token, poolId, state);
    }

    // ------------------------------------------------------------------ tasks and submissions

    /// @inheritdoc ITaskLedger
    function claimTask(uint32 poolId) external returns (uint256 taskId) {
        PoolHot memory hot = _poolHot[poolId];
        if (hot.windowLength == 0) revert TaskLedgerUnknownPool(poolId);
        if (hot.latestStep == _NO_CHECKPOINT) revert TaskLedgerNoCheckpoint(poolId);
        if (hot.openUntil != 0 && block.timestamp > hot.openUntil) _notOpen(poolId, hot.openUntil);
        _requireEligible(msg.sender, INodeRegistry.Role.Worker);
        NodeBook memory book = _books[msg.sender][poolId];
        if (book.openLeases >= hot.maxOpenLeases) {
            revert TaskLedgerTooManyLeases(msg.sender, book.openLeases, hot.maxOpenLeases);
        }
        // openLeases < maxOpenLeases <= 255; claims is one per transaction: neither overflows
        unchecked {
            book.openLeases += 1;
            book.claims += 1;
        }
        _books[msg.sender][poolId] = book;

        taskId = _nextTaskId;
        // a uint256 counter incremented by one per transaction cannot overflow
        unchecked {
            _nextTaskId = taskId + 1;
        }
        uint40 leaseExpiry = uint40(block.timestamp + hot.leaseDuration);
        _tasks[taskId] = Task({node: msg.sender, leaseExpiry: leaseExpiry, poolId: poolId, status: TaskStatus.Claimed});
        // The seed is keccak256(abi.encode(hash of THIS block, node, taskId)), computed off-chain from the
        // event's block: no transaction can know the hash of the block it is in, so a contract wallet cannot
        // claim, look at the seed and revert the claims it dislikes (see ITaskLedger.TaskClaimed).
        emit TaskClaimed(taskId, poolId, msg.sender, leaseExpiry);
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
        uint32 maxUnits = _poolCold[t.poolId].maxUnits;
        if (workUnits == 0 || workUnits > maxUnits) revert TaskLedgerInvalidWorkUnits(workUnits, maxUnits);
        _checkPolicyStep(policyStep, hot.latestStep, hot.asyncLevel);

        // workUnits < 2**32 and rewardPerUnit < 2**96: the product fits in 128 bits
        uint128 reward = uint128(workUnits) * hot.rewardPerUnit;
        _reserve(msg.sender, t.poolId, hot.maxReservationBps, reward);

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
        Challenge storage prev = _challenges[submissionId]; // reads its first slot only
        if (prev.status == ChallengeStatus.Open) revert TaskLedgerAlreadyChallenged(submissionId);
        if (t.status != TaskStatus.Submitted) revert TaskLedgerInvalidStatus(submissionId, t.status);
        uint40 windowEnd = _submissions[submissionId].windowEnd;
        if (block.timestamp >= windowEnd) revert TaskLedgerWindowClosed(submissionId, windowEnd);
        _requireJudge(submissionId, t.node);

        // The electorate is the state at the end of the previous block: stake moved in this block (or later)
        // weighs nothing in this round.
        uint32 snapshot = SafeCast.toUint32(block.number - 1);
        uint96 weight = SafeCast.toUint96(_stakeManager.validatorWeightAt(msg.sender, snapshot));
        if (weight == 0) revert TaskLedgerNoVotingWeight(submissionId, msg.sender);

        PoolCold memory cold = _poolCold[t.poolId];
        uint40 voteEnd = uint40(block.timestamp + cold.votePeriod);
        challengeId = submissionId;
        uint16 round = prev.round + 1; // checked: 65,535 rounds of forfeited bonds in one window cannot happen
        prev.challenger = msg.sender;
        prev.voteEnd = voteEnd;
        prev.snapshot = snapshot;
        prev.status = ChallengeStatus.Open;
        prev.round = round;
        if (round > 1) {
            // the previous round's votes (its second slot; a first round finds it empty and leaves it alone)
            prev.weightFor = 0;
            prev.weightAgainst = 0;
            prev.votesFor = 0;
            prev.votesAgainst = 0;
        }
        t.status = TaskStatus.Challenged;
        _tasks[submissionId] = t;
        emit ChallengeOpened(challengeId, t.node, msg.sender, evidenceCid, voteEnd, round, snapshot, weight);
        _stakeManager.challengeOpened(t.node);
        _token.safeTransferFrom(msg.sender, address(this), cold.challengeBond);
    }

    /// @inheritdoc ITaskLedger
    function vote(uint256 challengeId, bool uphold) external {
        Challenge memory c = _openChallenge(challengeId);
        if (block.timestamp >= c.voteEnd) revert TaskLedgerVotePeriodOver(challengeId, c.voteEnd);
        if (msg.sender == c.challenger || _voted[challengeId][msg.sender] >> 1 == c.round) {
            revert TaskLedgerAlreadyVoted(challengeId, msg.sender);
        }
        _requireJudge(challengeId, _tasks[challengeId].node);
        uint96 weight = SafeCast.toUint96(_stakeManager.validatorWeightAt(msg.sender, c.snapshot));
        if (weight == 0) revert TaskLedgerNoVotingWeight(challengeId, msg.sender);
        _voted[challengeId][msg.sender] = (uint24(c.round) << 1) | (uphold ? 1 : 0);
        Challenge storage cs = _challenges[challengeId];
        // checked sums: distinct voters' weights at one block add up to at most the electorate
        if (uphold) {
            cs.weightFor = c.weightFor + weight;
            cs.votesFor = c.votesFor + 1;
        } else {
            cs.weightAgainst = c.weightAgainst + weight;
            cs.votesAgainst = c.votesAgainst + 1;
        }
        emit VoteCast(challengeId, msg.sender, uphold, weight);
    }

    /// @inheritdoc ITaskLedger
    function resolve(uint256 challengeId) external nonReentrant returns (bool upheld) {
        Challenge memory c = _openChallenge(challengeId);
        Task memory t = _tasks[challengeId];
        PoolCold memory cold = _poolCold[t.poolId];
        _tally(c);
        ChallengeStatus outcome = _outcome(c, cold.quorum);
        if (outcome == ChallengeStatus.Open) revert TaskLedgerVotePeriodActive(challengeId, c.voteEnd);

        upheld = outcome == ChallengeStatus.Upheld;
        _challenges[challengeId].status = outcome;
        t.status = upheld ? TaskStatus.Upheld : TaskStatus.Submitted;
        _tasks[challengeId] = t;
        address bondTo = c.challenger; // upheld or no quorum: the bond goes back
        if (upheld) {
            _unreserve(t.node, t.poolId, _submissions[challengeId].reward);
            uint32 epoch = _slashEpoch[t.node];
            // the epoch ends now: its submissions whose window is still open are void, the others stay payable
            _wipedAt[t.node][epoch] = uint40(block.timestamp);
            _slashEpoch[t.node] = epoch + 1;
            emit WorkerWiped(t.node, epoch + 1);
        }
        // Upheld: the slash (capped at the workers' minimum stake) goes wholly to the treasury: a challenger
        // friendly to the worker, who may open the first round before honest verdicts exist, must not win part
        // of it back (issue 33).
        (uint256 slashed, address treasury) = _stakeManager.closeChallenge(t.node, upheld ? cold.slashAmount : 0);
        if (outcome == ChallengeStatus.Rejected) bondTo = treasury;
        emit ChallengeResolved(challengeId, upheld, outcome, c.weightFor, c.weightAgainst, slashed);
        _token.safeTransfer(bondTo, cold.challengeBond);
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
            _expectStatus(id, t.status, TaskStatus.Submitted);
            if (t.node != lastNode) {
                lastNode = t.node;
                owner = _registry.ownerOf(t.node);
            }
            if (msg.sender != t.node && msg.sender != owner) revert TaskLedgerNotNodeOrOwner(id, msg.sender);
            if (payee == address(0)) payee = owner;
            else if (owner != payee) revert TaskLedgerMixedOwners(id, owner, payee);
            Submission memory s = _submissions[id];
            if (block.timestamp < s.windowEnd) revert TaskLedgerWindowOpen(id, s.windowEnd);
            if (_isVoid(t.node, s)) revert TaskLedgerSubmissionVoided(id);

            t.status = TaskStatus.Paid;
            _tasks[id] = t;
            PoolFunds storage funds = _funds[t.poolId];
            funds.reserved -= s.reward;
            _books[t.node][t.poolId].reserved -= s.reward;
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
            _expectStatus(id, t.status, TaskStatus.Submitted);
            Submission memory s = _submissions[id];
            if (!_isVoid(t.node, s)) revert TaskLedgerNotVoidable(id);
            t.status = TaskStatus.Voided;
            _tasks[id] = t;
            _unreserve(t.node, t.poolId, s.reward);
            released += s.reward;
            emit SubmissionVoided(id, t.node, s.reward);
        }
    }

    /// @inheritdoc ITaskLedger
    function expireLease(uint256 taskId) external {
        Task memory t = _tasks[taskId];
        _expectStatus(taskId, t.status, TaskStatus.Claimed);
        if (block.timestamp <= t.leaseExpiry) revert TaskLedgerLeaseNotExpired(taskId, t.leaseExpiry);
        t.status = TaskStatus.Expired;
        _tasks[taskId] = t;
        NodeBook memory book = _books[t.node][t.poolId];
        // the claim opened this lease (openLeases >= 1); expiredLeases counts at most one per claim
        unchecked {
            book.openLeases -= 1;
            book.expiredLeases += 1;
        }
        _books[t.node][t.poolId] = book;
        emit LeaseExpired(taskId, t.node, book.openLeases, book.expiredLeases);
    }

    // ------------------------------------------------------------------ admin

    /// @inheritdoc ITaskLedger
    function setMinWindowLength(uint32 minWindowLength_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setMinWindowLength(minWindowLength_);
    }

    /// @inheritdoc ITaskLedger
    function setPoolBounds(uint128 minChallengeBond_, uint16 minQuorum_, uint32 reservationLeverage_)
        external
        onlyRole(DEFAULT_ADMIN_ROLE)
    {
        _minChallengeBond = minChallengeBond_;
        _minQuorum = minQuorum_;
        _reservationLeverage = reservationLeverage_;
        emit PoolBoundsSet(minChallengeBond_, minQuorum_, reservationLeverage_);
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
            rulesCid: _rulesCid[poolId],
            rewardPerUnit: hot.rewardPerUnit,
            challengeBond: cold.challengeBond,
            slashAmount: cold.slashAmount,
            windowLength: hot.windowLength,
            votePeriod: cold.votePeriod,
            leaseDuration: hot.leaseDuration,
            maxUnitsPerSubmission: cold.maxUnits,
            asyncLevel: hot.asyncLevel,
            quorum: cold.quorum,
            maxOpenLeases: hot.maxOpenLeases,
            maxReservationBps: hot.maxReservationBps
        });
        view_.budget = funds.budget;
        view_.reserved = funds.reserved;
        view_.hasCheckpoint = hot.latestStep != _NO_CHECKPOINT;
        view_.latestStep = view_.hasCheckpoint ? hot.latestStep : 0;
    }

    /// @inheritdoc ITaskLedger
    function poolState(uint32 poolId) external view returns (PoolState state, uint256 openUntil) {
        openUntil = _requirePool(poolId).openUntil;
        state = openUntil != 0 && block.timestamp > openUntil ? PoolRules.stateOf(uint32(openUntil)) : PoolState.Open;
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
        _tally(c);
        return ChallengeView({
            challenger: c.challenger,
            voteEnd: c.voteEnd,
            votesFor: c.votesFor,
            votesAgainst: c.votesAgainst,
            status: c.status,
            weightFor: c.weightFor,
            weightAgainst: c.weightAgainst,
            snapshotBlock: c.snapshot,
            round: c.round
        });
    }

    /// @inheritdoc ITaskLedger
    function voteOf(uint256 challengeId, address validator) external view returns (uint16 round, bool uphold) {
        uint24 v = _voted[challengeId][validator];
        return (uint16(v >> 1), v & 1 == 1);
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
        if (block.timestamp < s.windowEnd || _isVoid(t.node, s)) return 0;
        return s.reward;
    }

    /// @inheritdoc ITaskLedger
    function poolBounds() external view returns (uint256, uint256, uint256) {
        return (_minChallengeBond, _minQuorum, _reservationLeverage);
    }

    /// @inheritdoc ITaskLedger
    function nodeBook(address node, uint32 poolId) external view returns (NodeBook memory) {
        return _books[node][poolId];
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

    /// @dev The pool's hot slot, after checking that the caller owns the pool.
    function _requireOwner(uint32 poolId) private view returns (PoolHot storage hot) {
        hot = _requirePool(poolId);
        if (_poolCold[poolId].owner != msg.sender) revert TaskLedgerNotPoolOwner(poolId, msg.sender);
    }

    /// @dev Active node of `role` with at least the role's minimum stake (one StakeManager read: it keeps the
    /// registry's role and status next to the stake).
    function _requireEligible(address node, INodeRegistry.Role role) private view {
        if (!_stakeManager.isEligible(node, role)) revert TaskLedgerNotEligible(node, uint8(role));
    }

    /// @dev The caller may judge `worker`'s submission: an eligible validator of another owner.
    function _requireJudge(uint256 submissionId, address worker) private view {
        _requireEligible(msg.sender, INodeRegistry.Role.Validator);
        if (msg.sender == worker || _registry.ownerOf(worker) == _registry.ownerOf(msg.sender)) {
            revert TaskLedgerConflictOfInterest(submissionId, msg.sender);
        }
    }

    /// @dev Reverts with the state of a pool that takes no claim now: Paused, Finished or Stalled (open, but its
    /// trainer's heartbeat lapsed at `openUntil`).
    function _notOpen(uint32 poolId, uint32 openUntil) private pure {
        revert TaskLedgerPoolNotOpen(poolId, PoolRules.stateOf(openUntil));
    }

    /// @dev One place that encodes TaskLedgerInvalidPoolParam (call sites only push the name: smaller code).
    function _invalidParam(string memory param) private pure {
        revert TaskLedgerInvalidPoolParam(param);
    }

    /// @dev Reverts unless a task is in `expected` status (TaskLedgerUnknownTask when there is no such task).
    function _expectStatus(uint256 taskId, TaskStatus actual, TaskStatus expected) private pure {
        if (actual != expected) {
            if (actual == TaskStatus.None) revert TaskLedgerUnknownTask(taskId);
            revert TaskLedgerInvalidStatus(taskId, actual);
        }
    }

    /// @dev Whether submission `s` of `node` was voided by a wipe: the node's epoch moved on since it was made
    /// and its window was still open when that epoch ended.
    function _isVoid(address node, Submission memory s) private view returns (bool) {
        return s.slashEpoch != _slashEpoch[node] && s.windowEnd > _wipedAt[node][s.slashEpoch];
    }

    /// @dev Moves `reward` from the pool's budget to its reservations and onto `node`'s book (whose lease it
    /// closes), keeping the node's reservations within `bps` of the pool's escrow and within the reservation
    /// leverage times its active stake: N keys of the minimum stake hold what one key of their summed stake
    /// holds, not N shares of the escrow (issue 33).
    function _reserve(address node, uint32 poolId, uint16 bps, uint128 reward) private {
        PoolFunds memory funds = _funds[poolId];
        if (funds.budget < reward) revert TaskLedgerInsufficientBudget(poolId, funds.budget, reward);
        NodeBook memory book = _books[node][poolId];
        // the cap is a share of the escrow (budget + reserved), which this move keeps constant
        uint256 cap = (uint256(funds.budget) + funds.reserved) * bps / _BPS;
        uint256 leverage = _reservationLeverage;
        if (leverage != 0) {
            uint256 byStake = _stakeManager.activeStake(node) * leverage;
            if (byStake < cap) cap = byStake;
        }
        uint256 reserved = uint256(book.reserved) + reward;
        if (reserved > cap) revert TaskLedgerReservationCap(node, reserved, cap);
        // reserved <= cap <= escrow < 2**128; the claim opened this lease, so openLeases >= 1;
        // budget >= reward, and reserved + reward <= total escrow < 2**128
        unchecked {
            book.reserved = uint128(reserved);
            book.openLeases -= 1;
            funds.budget -= reward;
            funds.reserved += reward;
        }
        _books[node][poolId] = book;
        _funds[poolId] = funds;
    }

    /// @dev Returns a submission's reservation to its pool's budget and takes it off its node's book.
    function _unreserve(address node, uint32 poolId, uint128 amount) private {
        _release(poolId, amount);
        _books[node][poolId].reserved -= amount;
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

    /// @dev Adds the challenger's uphold vote (one vote of its weight at the snapshot) to a loaded challenge.
    function _tally(Challenge memory c) private view {
        // checked: the sum of distinct validators' weights at one block fits as their total does
        c.weightFor += SafeCast.toUint96(_stakeManager.validatorWeightAt(c.challenger, c.snapshot));
        c.votesFor += 1;
    }

    /// @dev (`c` tallied by `_tally`) The outcome of an open challenge now: Open while it is not decided. No
    /// outcome without the quorum: after the vote end a round below it is NoQuorum; before the vote end a round
    /// is decided only with the quorum met and no further vote able to change the outcome: every vote weighs its
    /// voter's stake at the snapshot, so the weights still missing are at most electorate - weightFor - weightAgainst.
    function _outcome(Challenge memory c, uint16 quorum) private view returns (ChallengeStatus) {
        bool quorate = uint256(c.votesFor) + c.votesAgainst >= quorum;
        if (block.timestamp >= c.voteEnd) {
            if (!quorate) return ChallengeStatus.NoQuorum;
            return c.weightFor > c.weightAgainst ? ChallengeStatus.Upheld : ChallengeStatus.Rejected;
        }
        if (quorate) {
            uint256 electorate = _stakeManager.totalValidatorWeightAt(c.snapshot);
            // weightFor > electorate / 2 > every possible weightAgainst
            if (2 * uint256(c.weightFor) > electorate) return ChallengeStatus.Upheld;
            // weightAgainst >= electorate / 2 >= every possible weightFor: a tie at best, and ties reject
            if (2 * uint256(c.weightAgainst) >= electorate) return ChallengeStatus.Rejected;
        }
        return ChallengeStatus.Open;
    }

    /// @dev Returns a submission's reservation to its pool's unreserved budget.
    function _release(uint32 poolId, uint128 amount) private {
        PoolFunds memory funds = _funds[poolId];
        funds.reserved -= amount;
        funds.budget += amount;
        _funds[poolId] = funds;
    }

    function _setMinWindowLength(uint32 minWindowLength_) private {
        if (minWindowLength_ == 0) _invalidParam("minWindowLength");
        _minWindowLength = minWindowLength_;
        emit MinWindowLengthSet(minWindowLength_);
    }
}
