// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ITaskLedger
/// @notice Pools, checkpoints, task claims with a chain-drawn seed, work submissions with slashing windows,
/// challenges with bonds and validator votes, and reward claims. Every call costs O(1) or O(batch).
///
/// Ids: pools are numbered from 1; a task id is global (from 1) and a submission's id IS its task id
/// (one submission per task); a challenge's id IS the submission id it challenges. A submission has at most
/// one OPEN challenge; once a challenge is rejected, another validator may challenge it again inside its
/// window (a new round of the same challenge id: a sham challenge voted down by a cartel shields nothing).
///
/// Dispute game: a challenge fixes its electorate when it opens, at the block before (`snapshotBlock`):
/// each vote weighs the voter's validator stake at that block (StakeManager checkpoints), the electorate is
/// the total validator stake at that block; exits, unstakes and registrations after it change nothing.
/// No outcome without the quorum (issue 33): a round whose votes (for + against) miss the pool's quorum by
/// the end of its vote period resolves NoQuorum: nobody loses (the bond goes back, no voter is on a losing
/// side, the submission is challengeable again inside its window). Early resolution only when the quorum is
/// met and the outcome can no longer change: upheld once weightFor > electorate / 2, rejected once
/// 2 * weightAgainst >= electorate. After the vote period, with the quorum: upheld iff weightFor >
/// weightAgainst (ties reject). An upheld challenge's slash goes wholly to the treasury: a challenger friendly
/// to the worker cannot win part of it back (issue 33, the sham-challenge race).
///
/// Reward wipe in O(1): each worker node has a slash epoch; a submission records the epoch it was made in;
/// an upheld challenge increments the worker's epoch and records when (the WorkerWiped block), which voids the worker's
/// unpaid submissions whose window was still open then (windowEnd > wipedAt); those whose window had closed
/// stay claimable. The voided reservations return to the pool budget through `voidSubmissions` (anyone; O(1)
/// per submission, lazily at the next touch).
///
/// Bounds (issue 21): a pool's slash is at most the workers' minimum stake (and is capped at it when applied),
/// its bond and quorum at least the ledger's protocol floors (`poolBounds`); a node holds at most
/// `maxOpenLeases` unsubmitted leases in a pool (an expired lease keeps its slot until `expireLease`, and
/// counts in the node's `expiredLeases`), and at most `maxReservationBps` of the pool's escrow in reservations,
/// and at most `reservationLeverage` times its active stake (issue 33: by stake, not per key).
interface ITaskLedger {
    /// @notice Lifecycle of a task id (and of the submission with the same id).
    /// None: unknown; Claimed: leased, not submitted; Submitted: in or after its window, claimable once the
    /// window closed; Challenged: a challenge is open; Upheld: the challenge was upheld (no reward);
    /// Paid: reward paid; Voided: wiped by a later upheld challenge of the same worker (no reward);
    /// Expired: the lease ran out before a submission and `expireLease` freed its slot.
    enum TaskStatus {
        None,
        Claimed,
        Submitted,
        Challenged,
        Upheld,
        Paid,
        Voided,
        Expired
    }

    /// @notice Lifecycle of a pool (issue 37). Open: takes claims and submissions while its trainer is alive (a
    /// checkpoint published or a heartbeat within the last lease duration); Paused: by its owner, resumable;
    /// Finished: for good (by its owner or trainer, or by anyone once the trainer's heartbeat lapsed), its
    /// unreserved budget refunded to the owner, its submitted work still paid. Stalled is never stored: `poolState`
    /// and `TaskLedgerPoolNotOpen` report an open pool whose trainer's heartbeat lapsed as Stalled.
    enum PoolState {
        Open,
        Paused,
        Finished,
        Stalled
    }

    /// @notice Lifecycle of a challenge. None: no challenge; Open: voting; Upheld / Rejected: resolved;
    /// NoQuorum: the vote period ended with fewer votes than the pool's quorum (no outcome, no loser).
    enum ChallengeStatus {
        None,
        Open,
        Upheld,
        Rejected,
        NoQuorum
    }

    /// @notice Parameters of a new pool (fixed after creation).
    /// @param trainer the address allowed to publish checkpoints (the trainer's key)
    /// @param rulesCid IPFS CID of the pool's rules (intellect.poolrules/v1: task set, model, group, budgets...);
    ///        a bare task set's CID (intellect.taskset/v1) for a pool without rules
    /// @param rewardPerUnit tokens paid per work unit
    /// @param challengeBond tokens a challenger posts (returned if upheld, forfeited if rejected)
    /// @param slashAmount tokens slashed from a worker per upheld challenge (capped at its stake)
    /// @param windowLength seconds a submission can be challenged (default 24 h; >= the ledger's minimum)
    /// @param votePeriod seconds validators vote on a challenge
    /// @param leaseDuration seconds a worker has to submit a claimed task
    /// @param maxUnitsPerSubmission upper bound on workUnits per submission
    /// @param asyncLevel how many steps behind the latest checkpoint a submission's policy may be (default 2)
    /// @param quorum minimum number of votes (for + against) for an upheld challenge (1 on dev pools)
    /// @param maxOpenLeases most unsubmitted leases one node may hold in the pool (1..255)
    /// @param maxReservationBps most of the pool's escrow (budget + reserved) one node may hold in
    /// reservations, in basis points (1..10,000)
    struct PoolParams {
        address trainer;
        string rulesCid;
        uint96 rewardPerUnit;
        uint128 challengeBond;
        uint128 slashAmount;
        uint32 windowLength;
        uint32 votePeriod;
        uint32 leaseDuration;
        uint32 maxUnitsPerSubmission;
        uint16 asyncLevel;
        uint16 quorum;
        uint8 maxOpenLeases;
        uint16 maxReservationBps;
    }

    /// @notice A node's book in one pool, as returned by `nodeBook`.
    /// @param reserved tokens reserved for the node's unpaid submissions (voided ones until `voidSubmissions`)
    /// @param openLeases claimed tasks neither submitted nor expired through `expireLease`
    /// @param expiredLeases leases that ran out unsubmitted (the node's record)
    /// @param claims tasks claimed in the pool
    struct NodeBook {
        uint128 reserved;
        uint16 openLeases;
        uint32 expiredLeases;
        uint48 claims;
    }

    /// @notice A pool as returned by `pool`.
    /// @param budget escrowed tokens not reserved by any submission
    /// @param reserved escrowed tokens reserved by unpaid submissions
    /// @param hasCheckpoint whether any checkpoint was published
    /// @param latestStep the latest published step (meaningful only if hasCheckpoint)
    struct PoolView {
        address owner;
        PoolParams params;
        uint256 budget;
        uint256 reserved;
        bool hasCheckpoint;
        uint256 latestStep;
    }

    /// @notice A task (and its submission) as returned by `task`.
    /// @param node the worker node that claimed it
    /// @param poolId its pool
    /// @param leaseExpiry last second at which the work may be submitted
    /// @param status lifecycle state
    /// @param reward tokens reserved for it at submission (0 before)
    /// @param windowEnd time its challenge window closes (0 before submission)
    /// @param slashEpoch the worker's slash epoch at submission
    struct TaskView {
        address node;
        uint32 poolId;
        uint40 leaseExpiry;
        TaskStatus status;
        uint128 reward;
        uint40 windowEnd;
        uint32 slashEpoch;
    }

    /// @notice A challenge (its latest round) as returned by `challengeInfo`.
    /// @param challenger validator that opened this round (its weight counts for upholding)
    /// @param voteEnd end of this round's vote period
    /// @param votesFor number of uphold votes (the challenger's included)
    /// @param votesAgainst number of reject votes
    /// @param status lifecycle of this round
    /// @param weightFor validator stake (at snapshotBlock) voting to uphold
    /// @param weightAgainst validator stake (at snapshotBlock) voting to reject
    /// @param snapshotBlock the block whose end state fixes this round's electorate (the StakeManager's
    /// `totalValidatorWeightAt(snapshotBlock)`) and weights
    /// @param round 1 for the first challenge of the submission, +1 per re-challenge after a rejection
    struct ChallengeView {
        address challenger;
        uint40 voteEnd;
        uint16 votesFor;
        uint16 votesAgainst;
        ChallengeStatus status;
        uint256 weightFor;
        uint256 weightAgainst;
        uint256 snapshotBlock;
        uint16 round;
    }

    /// @notice Emitted when `owner` creates pool `poolId`.
    event PoolCreated(uint32 indexed poolId, address indexed owner, address indexed trainer, PoolParams params);

    /// @notice Emitted when `from` escrows `amount` of reward tokens into the pool.
    event PoolFunded(uint32 indexed poolId, address indexed from, uint256 amount, uint256 budget);

    /// @notice Emitted when the pool owner takes `amount` of unreserved budget back to `to`.
    event PoolDefunded(uint32 indexed poolId, address indexed to, uint256 amount, uint256 budget);

    /// @notice Emitted when a pool is paused, resumed or finished; `openUntil`: claims are taken up to this time (0:
    /// none). A finish also emits PoolDefunded with the refund to the owner.
    event PoolStateChanged(uint32 indexed poolId, PoolState state, uint256 openUntil);

    /// @notice Emitted when the pool's trainer publishes the checkpoint of `step` (manifest on IPFS).
    event CheckpointPublished(uint32 indexed poolId, uint256 indexed step, string manifestCid);

    /// @notice Emitted when `node` claims task `taskId`. The task's seed (which assigns its problems) is
    /// keccak256(abi.encode(claimBlockHash, node, taskId)) where claimBlockHash is the hash of the block that
    /// holds this event: unknowable inside the claim transaction (BLOCKHASH of the current block is 0), so a
    /// claim cannot be made conditional on its seed. Workers and validators compute it from the log's block.
    event TaskClaimed(uint256 indexed taskId, uint32 indexed poolId, address indexed node, uint256 leaseExpiry);

    /// @notice Emitted when `node` submits the work of task `submissionId`; its challenge window ends at `windowEnd`.
    event WorkSubmitted(
        uint256 indexed submissionId,
        uint32 indexed poolId,
        address indexed node,
        string rolloutsCid,
        bytes32 proofsHash,
        uint256 workUnits,
        uint256 policyStep,
        uint256 reward,
        uint256 windowEnd
    );

    /// @notice Emitted when `challenger` challenges submission `challengeId` of `node` (its uphold vote counts,
    /// with `weight`); `round` counts the submission's challenges, `snapshotBlock` fixes the electorate.
    event ChallengeOpened(
        uint256 indexed challengeId,
        address indexed node,
        address indexed challenger,
        string evidenceCid,
        uint256 voteEnd,
        uint256 round,
        uint256 snapshotBlock,
        uint256 weight
    );

    /// @notice Emitted when `validator` votes with `weight` (its validator stake at the snapshot block); the
    /// running tallies are in `challengeInfo`.
    event VoteCast(uint256 indexed challengeId, address indexed validator, bool uphold, uint256 weight);

    /// @notice Emitted when a challenge's round is resolved: `outcome` Upheld, Rejected or NoQuorum (the vote
    /// period ended with fewer votes than the pool's quorum: the bond goes back, no voter is slashable, the
    /// submission is challengeable again inside its window). `slashed` is the stake slashed from the worker
    /// (0 unless upheld).
    event ChallengeResolved(
        uint256 indexed challengeId,
        bool indexed upheld,
        ChallengeStatus outcome,
        uint256 weightFor,
        uint256 weightAgainst,
        uint256 slashed
    );

    /// @notice Emitted when the pool owner announces taking back up to `amount` of budget, from `executableAt`
    /// (one lease duration later: every lease open now has ended by then).
    event PoolDefundAnnounced(uint32 indexed poolId, uint256 amount, uint256 executableAt);

    /// @notice Emitted when an upheld challenge wipes `node`'s unpaid submissions by moving it to `newEpoch`.
    event WorkerWiped(address indexed node, uint256 newEpoch);

    /// @notice Emitted when the reward of `submissionId` is paid to the node's owner.
    event RewardClaimed(uint256 indexed submissionId, address indexed node, address indexed owner, uint256 amount);

    /// @notice Emitted when a wiped submission's reservation returns to its pool's budget.
    event SubmissionVoided(uint256 indexed submissionId, address indexed node, uint256 released);

    /// @notice Emitted when anyone frees the slot of task `taskId`, whose lease ran out unsubmitted.
    event LeaseExpired(uint256 indexed taskId, address indexed node, uint256 openLeases, uint256 expiredLeases);

    /// @notice Emitted when the admin sets the protocol floors on new pools' challenge bond and quorum, and the
    /// reservation leverage (tokens a node may hold in reservations per token of active stake; 0: no bound).
    event PoolBoundsSet(uint256 minChallengeBond, uint256 minQuorum, uint256 reservationLeverage);

    /// @notice Emitted when the admin sets the shortest allowed window length.
    event MinWindowLengthSet(uint256 minWindowLength);

    /// @notice Thrown for a pool id that does not exist.
    error TaskLedgerUnknownPool(uint32 poolId);

    /// @notice Thrown when a pool parameter is invalid; `param` names it.
    error TaskLedgerInvalidPoolParam(string param);

    /// @notice Thrown when a pool's window is shorter than the ledger's minimum.
    error TaskLedgerWindowTooShort(uint256 windowLength, uint256 minWindowLength);

    /// @notice Thrown when the stake unbonding period does not exceed the pool's `exposure` = lease + window + vote
    /// period: a worker that unbonds right after claiming must still be slashable.
    error TaskLedgerUnbondingTooShort(uint256 exposure, uint256 unbondingPeriod);

    /// @notice Thrown when a pool's slash exceeds the workers' minimum stake (a pool could take a whole stake).
    error TaskLedgerSlashAboveMinStake(uint256 slashAmount, uint256 minStake);

    /// @notice Thrown when a pool's challenge bond is below the protocol floor.
    error TaskLedgerBondTooLow(uint256 challengeBond, uint256 minChallengeBond);

    /// @notice Thrown when a pool's quorum is below the protocol floor.
    error TaskLedgerQuorumTooLow(uint256 quorum, uint256 minQuorum);

    /// @notice Thrown when `node` already holds `openLeases` unsubmitted leases, the pool's maximum.
    error TaskLedgerTooManyLeases(address node, uint256 openLeases, uint256 maxOpenLeases);

    /// @notice Thrown when a submission would bring `node`'s reservations to `reserved`, above `cap`.
    error TaskLedgerReservationCap(address node, uint256 reserved, uint256 cap);

    /// @notice Thrown when expiring a lease that runs until `leaseExpiry`.
    error TaskLedgerLeaseNotExpired(uint256 taskId, uint256 leaseExpiry);

    /// @notice Thrown for a zero amount.
    error TaskLedgerZeroAmount();

    /// @notice Thrown when `caller` is not the pool's owner.
    error TaskLedgerNotPoolOwner(uint32 poolId, address caller);

    /// @notice Thrown when defunding more than the owner announced (`announced`), or before `executableAt`.
    error TaskLedgerDefundNotAnnounced(uint32 poolId, uint256 announced, uint256 executableAt);

    /// @notice Thrown when the pool's unreserved budget `available` is below `needed`.
    error TaskLedgerInsufficientBudget(uint32 poolId, uint256 available, uint256 needed);

    /// @notice Thrown when `caller` is not the pool's trainer.
    error TaskLedgerNotTrainer(uint32 poolId, address caller);

    /// @notice Thrown when a checkpoint step is not above the latest one.
    error TaskLedgerStepNotIncreasing(uint32 poolId, uint256 step, uint256 latestStep);

    /// @notice Thrown when a step does not fit the ledger's storage (>= 2**48 - 1).
    error TaskLedgerStepTooLarge(uint256 step);

    /// @notice Thrown when a claim or submission comes while the pool is Paused, Finished or Stalled (open, but its
    /// trainer's heartbeat lapsed), or when a finished pool's state is set.
    error TaskLedgerPoolNotOpen(uint32 poolId, PoolState state);

    /// @notice Thrown when the pool has no checkpoint yet (no task can be claimed).
    error TaskLedgerNoCheckpoint(uint32 poolId);

    /// @notice Thrown when no checkpoint was published for `step`.
    error TaskLedgerUnknownCheckpoint(uint32 poolId, uint256 step);

    /// @notice Thrown when `node` is not an active, minimally staked node of role `role` (see INodeRegistry.Role).
    error TaskLedgerNotEligible(address node, uint8 role);

    /// @notice Thrown for a task/submission id that does not exist.
    error TaskLedgerUnknownTask(uint256 taskId);

    /// @notice Thrown when `caller` is not the node that claimed the task.
    error TaskLedgerNotClaimant(uint256 taskId, address caller);

    /// @notice Thrown when submitting after the lease expired at `expiredAt`.
    error TaskLedgerLeaseExpired(uint256 taskId, uint256 expiredAt);

    /// @notice Thrown when the task/submission is in `status` and the call needs another status.
    error TaskLedgerInvalidStatus(uint256 taskId, TaskStatus status);

    /// @notice Thrown when workUnits is 0 or above the pool's maximum `maxUnits`.
    error TaskLedgerInvalidWorkUnits(uint256 workUnits, uint256 maxUnits);

    /// @notice Thrown when `policyStep` is older than `minStep` = latest - asyncLevel.
    error TaskLedgerStalePolicyStep(uint256 policyStep, uint256 minStep);

    /// @notice Thrown when `policyStep` is newer than the latest published step.
    error TaskLedgerFuturePolicyStep(uint256 policyStep, uint256 latestStep);

    /// @notice Thrown when challenging after the window of `submissionId` closed at `closedAt`.
    error TaskLedgerWindowClosed(uint256 submissionId, uint256 closedAt);

    /// @notice Thrown when claiming before the window of `submissionId` closes at `closesAt`.
    error TaskLedgerWindowOpen(uint256 submissionId, uint256 closesAt);

    /// @notice Thrown when the submission has an open challenge already.
    error TaskLedgerAlreadyChallenged(uint256 submissionId);

    /// @notice Thrown when `validator` had no validator stake at the challenge's snapshot block.
    error TaskLedgerNoVotingWeight(uint256 challengeId, address validator);

    /// @notice Thrown when `validator` (or its owner) would judge work of its own owner.
    error TaskLedgerConflictOfInterest(uint256 submissionId, address validator);

    /// @notice Thrown for a challenge id with no challenge.
    error TaskLedgerUnknownChallenge(uint256 challengeId);

    /// @notice Thrown when the challenge is already resolved.
    error TaskLedgerChallengeNotOpen(uint256 challengeId, ChallengeStatus status);

    /// @notice Thrown when voting after the vote period ended at `endedAt`.
    error TaskLedgerVotePeriodOver(uint256 challengeId, uint256 endedAt);

    /// @notice Thrown when resolving before `endsAt` while the outcome can still change.
    error TaskLedgerVotePeriodActive(uint256 challengeId, uint256 endsAt);

    /// @notice Thrown when `validator` already voted (the challenger voted by challenging).
    error TaskLedgerAlreadyVoted(uint256 challengeId, address validator);

    /// @notice Thrown when the submission's worker was wiped after it was made (no reward).
    error TaskLedgerSubmissionVoided(uint256 submissionId);

    /// @notice Thrown when voiding a submission whose worker was not wiped since it was made.
    error TaskLedgerNotVoidable(uint256 submissionId);

    /// @notice Thrown when `caller` is neither the submission's node nor that node's owner.
    error TaskLedgerNotNodeOrOwner(uint256 submissionId, address caller);

    /// @notice Thrown when a claim batch mixes nodes of different owners.
    error TaskLedgerMixedOwners(uint256 submissionId, address owner, address expected);

    /// @notice Thrown for an empty batch.
    error TaskLedgerEmptyBatch();

    /// @notice Creates a pool owned by the caller. Its lease + window + vote period must be shorter than the
    /// stake unbonding period (no escaping a slash by withdrawing); the StakeManager keeps that as a floor.
    /// Its slash is at most the workers' minimum stake; its bond and quorum at least `poolBounds`; window and
    /// lease under 2**24 s (194 days), asyncLevel under 256.
    /// @return poolId the new pool's id
    function createPool(PoolParams calldata params) external returns (uint32 poolId);

    /// @notice Escrows `amount` reward tokens (transferFrom the caller) into the pool's budget. Anyone.
    function fundPool(uint32 poolId, uint256 amount) external;

    /// @notice Announces that the owner will take back up to `amount` of budget (replaces an earlier
    /// announcement); executable one lease duration later. Only the pool owner.
    function announceDefund(uint32 poolId, uint256 amount) external;

    /// @notice Returns `amount` of the pool's unreserved budget to `to`. Only the pool owner, at most what it
    /// announced at least one lease duration ago (`announceDefund`): no defund can front-run the submission of
    /// a lease that was open when it was announced.
    function defundPool(uint32 poolId, uint256 amount, address to) external;

    /// @notice Publishes the checkpoint of `step` (its Shardcast manifest's CID). Only the pool's trainer;
    /// the first step may be any, later ones strictly increase.
    function publishCheckpoint(uint32 poolId, uint256 step, string calldata manifestCid) external;

    /// @notice Sets a pool's state. Open: the trainer's heartbeat (an open pool takes claims for another lease
    /// duration; publishing a checkpoint does the same) or the owner's resume of a paused pool; Paused: the owner;
    /// Finished (for good): the owner or the trainer at any time, anyone once the trainer's heartbeat lapsed; the
    /// unreserved budget goes back to the owner, reserved rewards stay payable. Claims and submissions revert
    /// (`TaskLedgerPoolNotOpen`) unless the pool is open and its trainer alive.
    function setPoolState(uint32 poolId, PoolState state) external;

    /// @notice A pool's state (Stalled: open, but no heartbeat for a lease duration) and until when it takes claims.
    function poolState(uint32 poolId) external view returns (PoolState state, uint256 openUntil);

    /// @notice Claims a task in `poolId` for the calling worker node (active, minimally staked, holding fewer
    /// than `maxOpenLeases` open leases in the pool). The seed follows from the claim's block hash (TaskClaimed).
    /// @return taskId the task's id
    function claimTask(uint32 poolId) external returns (uint256 taskId);

    /// @notice Submits the work of a claimed task: only the claimant, inside the lease, once. Reserves
    /// workUnits * rewardPerUnit from the pool budget (the node's reservations in the pool stay within
    /// `maxReservationBps` of its escrow and within `reservationLeverage` times its active stake) and opens
    /// the challenge window.
    /// @param taskId the claimed task (becomes the submission id)
    /// @param rolloutsCid IPFS CID of the rollout file (kept in the event log only)
    /// @param proofsHash hash of the TOPLOC proofs (kept in the event log only)
    /// @param workUnits units of work done (1..maxUnitsPerSubmission)
    /// @param policyStep checkpoint step the rollouts were generated with (latest - asyncLevel .. latest)
    function submitWork(
        uint256 taskId,
        string calldata rolloutsCid,
        bytes32 proofsHash,
        uint32 workUnits,
        uint256 policyStep
    ) external;

    /// @notice Challenges a submission inside its window (again, after a rejected round). Only an active,
    /// minimally staked validator with stake at the snapshot block whose owner does not own the worker; pulls
    /// the pool's challenge bond; counts as the challenger's uphold vote, weighted by its stake at the snapshot.
    /// @return challengeId equal to `submissionId`
    function challenge(uint256 submissionId, string calldata evidenceCid) external returns (uint256 challengeId);

    /// @notice Votes on an open challenge during its vote period, weighted by the voter's validator stake at the
    /// challenge's snapshot block. Only other active, minimally staked validators with stake at the snapshot,
    /// once each per round, not one whose owner owns the challenged worker.
    function vote(uint256 challengeId, bool uphold) external;

    /// @notice Resolves a challenge: anyone, after the vote period, or earlier once the outcome cannot change
    /// (see the dispute game above). Upheld iff weightFor > weightAgainst and votesFor + votesAgainst >= quorum.
    /// Upheld: slash the worker (all to the treasury), wipe its unpaid rewards, return the bond; rejected:
    /// forfeit the bond; NoQuorum (the vote period ended below the quorum): return the bond.
    /// @return upheld the outcome
    function resolve(uint256 challengeId) external returns (bool upheld);

    /// @notice Pays the rewards of finalised submissions (window closed, not challenged or challenge
    /// rejected, worker not wiped since) to their node's owner. Caller: the node or its owner. O(batch).
    /// @return total tokens paid
    function claimRewards(uint256[] calldata submissionIds) external returns (uint256 total);

    /// @notice Returns the reservations of submissions voided by a wipe to their pools' budgets. Anyone. O(batch).
    /// @return released tokens returned to pool budgets
    function voidSubmissions(uint256[] calldata submissionIds) external returns (uint256 released);

    /// @notice Frees the lease slot of a task whose lease ran out unsubmitted (status Expired; the node's
    /// `expiredLeases` grows). Anyone.
    function expireLease(uint256 taskId) external;

    /// @notice Sets the shortest allowed pool window. Only the admin.
    function setMinWindowLength(uint32 minWindowLength) external;

    /// @notice Sets the protocol floors on new pools' challenge bond and quorum, and the reservation leverage:
    /// a node's reservations in a pool stay within `reservationLeverage` times its active stake (0: no bound).
    /// Only the admin.
    function setPoolBounds(uint128 minChallengeBond, uint16 minQuorum, uint32 reservationLeverage) external;

    /// @notice The protocol floors on new pools' challenge bond and quorum, and the reservation leverage.
    function poolBounds()
        external
        view
        returns (uint256 minChallengeBond, uint256 minQuorum, uint256 reservationLeverage);

    /// @notice `node`'s book in pool `poolId` (reservations, open and expired leases, claims).
    function nodeBook(address node, uint32 poolId) external view returns (NodeBook memory);

    /// @notice A pool's parameters, owner, budget and latest checkpoint.
    function pool(uint32 poolId) external view returns (PoolView memory);

    /// @notice Number of pools created (ids are 1..poolCount).
    function poolCount() external view returns (uint32);

    /// @notice Manifest CID of the checkpoint at `step` (reverts TaskLedgerUnknownCheckpoint if none).
    function checkpoint(uint32 poolId, uint256 step) external view returns (string memory);

    /// @notice Latest published step of the pool (reverts TaskLedgerNoCheckpoint if none).
    function latestStep(uint32 poolId) external view returns (uint256);

    /// @notice A task and its submission.
    function task(uint256 taskId) external view returns (TaskView memory);

    /// @notice A challenge (id = submission id).
    function challengeInfo(uint256 challengeId) external view returns (ChallengeView memory);

    /// @notice The round `validator` last voted in on this challenge (0: never; its challenger is not listed:
    /// a challenge is its challenger's uphold vote) and how.
    function voteOf(uint256 challengeId, address validator) external view returns (uint16 round, bool uphold);

    /// @notice Current slash epoch of `node`.
    function slashEpoch(address node) external view returns (uint32);

    /// @notice Reward claimable now for `submissionId` (0 if not claimable now).
    function claimable(uint256 submissionId) external view returns (uint256);

    /// @notice Id the next claimed task will get.
    function nextTaskId() external view returns (uint256);

    /// @notice Shortest allowed pool window in seconds.
    function minWindowLength() external view returns (uint32);

    /// @notice The token, registry and stake manager this ledger uses.
    function token() external view returns (address);

    /// @notice The node registry.
    function registry() external view returns (address);

    /// @notice The stake manager.
    function stakeManager() external view returns (address);
}
