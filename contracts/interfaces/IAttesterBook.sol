// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IAttesterBook
/// @notice Validators paid for checking and accountable for their word (issue 21).
///
/// Pay: a pool's owner sets, once, a reward per attestation (a pool rule) and funds it here. The pool's trainer
/// records, inside a submission's window, the validators whose attestations it used; each record reserves one
/// reward. After the window the reward is paid to the validator's owner if the submission was paid or is
/// claimable (like the worker's); if the submission was upheld or voided, the reservation returns to the pool.
///
/// Per step (issue 38): instead of one record per submission, the trainer may record one Merkle root of a step's
/// used attestations (`recordAttestationRoot`; roots are per pool, so no other pool's trainer can record one
/// first): leaf = keccak256(keccak256(abi.encode(index, submissionId,
/// validator, amount))), the tree OpenZeppelin's (commutative pair hashing, complete, leaves in array order), the
/// leaves published as a JSON file under `leavesCid`. The root reserves `total` from the budget at once; a validator
/// claims any set of its leaves with one multiproof (`claimAttesterRewards`), each under the same rules as a
/// recorded attestation (the submission of the root's pool, recorded inside its window, a registered validator of
/// another owner than the worker's, the submission paid or claimable), each leaf once; leaves of upheld or voided
/// work, or that break those rules, return to the budget (`releaseAttesterRewards`). A root never pays more than
/// its `total`: the pool's trainer is trusted with the owner's attester budget, as it is with records.
///
/// Accountability: an attestation is the validator's EIP-712 signature (domain "intellect-attestation" v1,
/// the chain and the TaskLedger's address; message Attestation(submissionId, rolloutsCidHash, proofsHash,
/// policyStep, accepted)), the one the agents already exchange. Anyone holding an `accepted` attestation of a
/// submission that the ledger UPHELD as bad may slash its signer (`attesterSlash`, capped at the validators'
/// minimum stake), once per submission and validator; the reporter gets the challenger's share of the slash.
///
/// A validator that voted against the outcome of a challenge's latest round (the ledger keeps each voter's
/// side: `voteOf`) may be slashed by anyone (`voterSlash`, capped likewise), once per challenge round.
///
/// Votes on the winning side are paid (issue 33): a pool's owner sets, once, a reward per resolved challenge
/// (below the pool's challenge bond), paid from the pool's attester budget to the winning side of the latest round
/// (the voters whose vote was the outcome, and the challenger of an upheld round), each its share by the stake it
/// weighed at the round's snapshot: the shares add up to at most the reward whatever the number of keys, a sham
/// challenge costs its bond more than its friends' shares can bring back, and the slash pays nothing back.
///
/// Canaries follow with no extra rule: the trainer submits, from a worker node of its own, work it knows to be
/// bad (on-chain a submission like any other), gets it upheld (its own validator challenges it; honest ones
/// vote) and slashes every validator that attested it: attesting without checking loses in expectation.
interface IAttesterBook {
    /// @notice Emitted when the owner of pool `poolId` fixes its reward per attestation.
    event AttesterRewardSet(uint32 indexed poolId, uint256 rewardPerAttestation);

    /// @notice Emitted when `from` funds the attester rewards of pool `poolId`.
    event AttesterRewardsFunded(uint32 indexed poolId, address indexed from, uint256 amount, uint256 budget);

    /// @notice Emitted when the trainer records that it used `validator`'s attestation of `submissionId`;
    /// `reward`: the reward per attestation times the slots `validator` held.
    event AttestationRecorded(uint256 indexed submissionId, address indexed validator, uint256 reward);

    /// @notice Emitted when the trainer of pool `poolId` records a step's used attestations as Merkle root `root`
    /// of `leafCount` leaves reserving `total`, the leaves published under `leavesCid`.
    event AttestationRootRecorded(
        uint32 indexed poolId, bytes32 indexed root, uint256 leafCount, uint256 total, string leavesCid
    );

    /// @notice Emitted when the reward of `validator`'s attestation of `submissionId` is paid to `owner`.
    event AttesterRewardPaid(uint256 indexed submissionId, address indexed validator, address indexed owner, uint256 amount);

    /// @notice Emitted when the reward of an attestation of an upheld or voided submission returns to its pool.
    event AttesterRewardReleased(uint256 indexed submissionId, address indexed validator, uint256 amount);

    /// @notice Emitted when `validator` is slashed for attesting `submissionId`, which the ledger upheld as bad.
    event AttesterSlashed(uint256 indexed submissionId, address indexed validator, address indexed reporter, uint256 slashed);

    /// @notice Emitted when the admin sets the slash for attesting upheld work.
    event AttesterSlashSet(uint256 amount);

    /// @notice Emitted when `validator` is slashed for voting against the outcome of round `round`.
    event VoterSlashed(uint256 indexed challengeId, address indexed validator, uint256 round, uint256 slashed);

    /// @notice Emitted when the admin sets the slash for voting against the outcome.
    event VoterSlashSet(uint256 amount);

    /// @notice Emitted when the owner of pool `poolId` fixes its reward per resolved challenge.
    event VoterRewardSet(uint32 indexed poolId, uint256 rewardPerChallenge);

    /// @notice Emitted when `validator`'s share of the reward of round `round` of `challengeId` is paid to `owner`.
    event VoterRewardPaid(
        uint256 indexed challengeId, address indexed validator, address indexed owner, uint256 round, uint256 amount
    );

    /// @notice Thrown when `caller` is not the owner of pool `poolId`.
    error AttesterBookNotPoolOwner(uint32 poolId, address caller);

    /// @notice Thrown when pool `poolId`'s reward per attestation is already set.
    error AttesterBookRewardAlreadySet(uint32 poolId);

    /// @notice Thrown when `caller` is not the trainer of the submission's pool.
    error AttesterBookNotTrainer(uint256 submissionId, address caller);

    /// @notice Thrown when recording after the submission's window closed at `windowEnd`.
    error AttesterBookWindowClosed(uint256 submissionId, uint256 windowEnd);

    /// @notice Thrown when paying before the submission's window closes at `windowEnd`, or while it is not
    /// payable (challenged, or not yet decided).
    error AttesterBookNotPayable(uint256 submissionId, address validator);

    /// @notice Thrown when releasing a reward of a submission that was neither upheld nor voided.
    error AttesterBookNotReleasable(uint256 submissionId, address validator);

    /// @notice Thrown when `validator` is not a registered validator of another owner than the worker's.
    error AttesterBookNotAttester(uint256 submissionId, address validator);

    /// @notice Thrown when `validator`'s attestation of `submissionId` is recorded already (or none is, to pay).
    error AttesterBookBadRecord(uint256 submissionId, address validator);

    /// @notice Thrown when the pool's attester budget `budget` is below `needed`.
    error AttesterBookInsufficientBudget(uint32 poolId, uint256 budget, uint256 needed);

    /// @notice Thrown when slashing for a submission the ledger did not uphold.
    error AttesterBookNotUpheld(uint256 submissionId);

    /// @notice Thrown when the signature is not `validator`'s accepting attestation (`signer` recovered).
    error AttesterBookBadSignature(address validator, address signer);

    /// @notice Thrown when `validator` was slashed for `submissionId` already.
    error AttesterBookAlreadySlashed(uint256 submissionId, address validator);

    /// @notice Thrown when `validator` did not vote against the outcome of the challenge's latest, resolved round.
    error AttesterBookNotLosingVoter(uint256 challengeId, address validator);

    /// @notice Thrown for an empty or too long batch (at most 16 validators per submission and call).
    error AttesterBookBadBatch(uint256 length);

    /// @notice Thrown when `caller` is not the trainer of pool `poolId`.
    error AttesterBookNotPoolTrainer(uint32 poolId, address caller);

    /// @notice Thrown when recording a zero root, a root without leaves, or a root recorded already.
    error AttesterBookBadRoot(bytes32 root);

    /// @notice Thrown when `root` was never recorded.
    error AttesterBookUnknownRoot(bytes32 root);

    /// @notice Thrown when the multiproof does not prove the leaves under `root`.
    error AttesterBookBadProof(bytes32 root);

    /// @notice Thrown when leaf `index` of `root` is out of range or settled already (paid or released).
    error AttesterBookLeafSettled(bytes32 root, uint256 index);

    /// @notice Thrown when paying leaves would take `root` past the `remaining` it reserved.
    error AttesterBookRootSpent(bytes32 root, uint256 remaining, uint256 needed);

    /// @notice Thrown when pool `poolId`'s reward per resolved challenge is already set.
    error AttesterBookVoterRewardAlreadySet(uint32 poolId);

    /// @notice Thrown when a reward per resolved challenge is not below the pool's challenge bond.
    error AttesterBookVoterRewardTooHigh(uint32 poolId, uint256 reward, uint256 challengeBond);

    /// @notice Thrown when the challenge's pool pays no reward per resolved challenge.
    error AttesterBookNoVoterReward(uint32 poolId);

    /// @notice Thrown when `validator` is not on the winning side of the challenge's latest, resolved round.
    error AttesterBookNotWinningVoter(uint256 challengeId, address validator);

    /// @notice Thrown when `validator`'s vote in the challenge's latest round was already paid or slashed.
    error AttesterBookVoteSettled(uint256 challengeId, address validator);

    /// @notice Sets, once, pool `poolId`'s reward per recorded attestation. Only the pool's owner.
    function setAttesterReward(uint32 poolId, uint96 rewardPerAttestation) external;

    /// @notice Escrows `amount` (transferFrom the caller) for pool `poolId`'s attester rewards. Anyone.
    function fundAttesterRewards(uint32 poolId, uint256 amount) external;

    /// @notice Records that the trainer used these validators' attestations of `submissionId` (inside its
    /// window; registered validators of another owner than the worker's; each recorded once per submission).
    /// A validator is listed once per assignment slot it holds, its entries adjacent, and reserved one reward
    /// per slot (one `AttestationRecorded` with the sum): pay follows stake, never the number of keys. Only the
    /// trainer of the submission's pool. O(batch), at most 16 entries.
    function recordAttestations(uint256 submissionId, address[] calldata validators) external;

    /// @notice One leaf of an attestation root: its position in the tree, the submission and the amount (the
    /// reward per attestation times the slots the validator held).
    struct AttestationLeaf {
        uint256 index;
        uint256 submissionId;
        uint256 amount;
    }

    /// @notice Records a step's used attestations as one Merkle root (see the contract's notice) of `leafCount`
    /// leaves, reserving `total` from the pool's attester budget; `leavesCid` names the published leaves. Only the
    /// pool's trainer; each root once per pool.
    function recordAttestationRoot(uint32 poolId, bytes32 root, uint32 leafCount, uint128 total, string calldata leavesCid)
        external;

    /// @notice Pays `validator`'s owner the rewards of `leaves` of pool `poolId`'s `root` (OpenZeppelin multiproof: `proof`,
    /// `proofFlags`, leaves in tree order), each under the rules of a recorded attestation; anyone may send it; at
    /// most 256 leaves. Returns the total paid.
    function claimAttesterRewards(
        uint32 poolId,
        bytes32 root,
        address validator,
        AttestationLeaf[] calldata leaves,
        bytes32[] calldata proof,
        bool[] calldata proofFlags
    ) external returns (uint256 total);

    /// @notice Returns to pool `poolId`'s budget the rewards of `leaves` of its `root` that can never be paid: their work
    /// upheld or voided, or the leaf breaks a rule (another pool's submission, recorded after its window, not a
    /// validator, the worker's own owner). Anyone; at most 256 leaves. Returns the total released.
    function releaseAttesterRewards(
        uint32 poolId,
        bytes32 root,
        address validator,
        AttestationLeaf[] calldata leaves,
        bytes32[] calldata proof,
        bool[] calldata proofFlags
    ) external returns (uint256 total);

    /// @notice Pool `poolId`'s root `root`: when it was recorded (0: never), its leaves and what it still reserves.
    function attestationRoot(uint32 poolId, bytes32 root)
        external
        view
        returns (uint40 recordedAt, uint32 leafCount, uint128 remaining);

    /// @notice Whether leaf `index` of pool `poolId`'s root `root` is settled (paid or released).
    function leafSettled(uint32 poolId, bytes32 root, uint256 index) external view returns (bool);

    /// @notice Pays a recorded attestation's reward to the validator's owner once the submission is final and
    /// payable (window closed, not challenged, not upheld, not voided). Anyone.
    function claimAttesterReward(uint256 submissionId, address validator) external returns (uint256 amount);

    /// @notice Returns a recorded attestation's reward to its pool when the submission was upheld or voided.
    function releaseAttesterReward(uint256 submissionId, address validator) external returns (uint256 amount);

    /// @notice Slashes `validator` for its accepting attestation (`signature`) of `submissionId`, which the
    /// ledger upheld as bad. Anyone (the reporter gets the challenger's share of the slash); once per pair.
    function slashAttester(
        uint256 submissionId,
        address validator,
        bytes32 rolloutsCidHash,
        bytes32 proofsHash,
        uint256 policyStep,
        bytes calldata signature
    ) external returns (uint256 slashed);

    /// @notice Sets the slash for attesting upheld work (capped at the validators' minimum stake). Only the admin.
    function setAttesterSlash(uint256 amount) external;

    /// @notice Slashes `validator` for voting against the outcome of the latest round of `challengeId` (resolved
    /// upheld or rejected; a NoQuorum round has no outcome and no losing voter); anyone (the reporter gets the
    /// challenger's share); once per round.
    function slashVoter(uint256 challengeId, address validator) external returns (uint256 slashed);

    /// @notice Sets the slash for voting against the outcome (capped at the validators' minimum stake). Admin.
    function setVoterSlash(uint256 amount) external;

    /// @notice The slash for voting against the outcome.
    function voterSlash() external view returns (uint256);

    /// @notice Sets, once, pool `poolId`'s reward per resolved challenge (below its challenge bond), shared by the
    /// winning side of each challenge's latest round by stake weight. Only the pool's owner.
    function setVoterReward(uint32 poolId, uint96 rewardPerChallenge) external;

    /// @notice Pays `validator`'s owner its share of the pool's reward per resolved challenge: `validator` voted
    /// for the outcome of the latest round of `challengeId` (resolved upheld or rejected), or opened that round
    /// and it was upheld; share = reward x its weight / the winning side's weight, both at the round's snapshot,
    /// from the pool's attester budget. Anyone; once per validator and round (a vote is paid or slashed, never both).
    function claimVoterReward(uint256 challengeId, address validator) external returns (uint256 amount);

    /// @notice Pool `poolId`'s reward per resolved challenge (0: none).
    function voterReward(uint32 poolId) external view returns (uint256);

    /// @notice Pool `poolId`'s reward per attestation and unreserved attester budget.
    function poolRule(uint32 poolId) external view returns (uint256 rewardPerAttestation, uint256 budget);

    /// @notice The reward reserved for `validator`'s attestation of `submissionId` (0: none or settled).
    function recorded(uint256 submissionId, address validator) external view returns (uint256);

    /// @notice The slash for attesting upheld work.
    function attesterSlash() external view returns (uint256);

    /// @notice The EIP-712 digest a validator signs to attest `submissionId` (the agents' attestation).
    function attestationDigest(
        uint256 submissionId,
        bytes32 rolloutsCidHash,
        bytes32 proofsHash,
        uint256 policyStep,
        bool accepted
    ) external view returns (bytes32);
}
