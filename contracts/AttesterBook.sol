// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";

import {IAttesterBook} from "./interfaces/IAttesterBook.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {ITaskLedger} from "./interfaces/ITaskLedger.sol";

/// @title AttesterBook
/// @notice Attester rewards and attester slashes beside the TaskLedger (see IAttesterBook). A contract of its
/// own: the ledger is at the EIP-170 size limit, and this one only reads the ledger's views and slashes through
/// the StakeManager (SLASHER_ROLE). Every call is O(1) or O(batch <= 16).
contract AttesterBook is AccessControl, ReentrancyGuardTransient, IAttesterBook {
    using SafeERC20 for IERC20;

    /// @notice EIP-712 type of an attestation (intellect.agents.attestation: the same message).
    bytes32 public constant ATTESTATION_TYPEHASH = keccak256(
        "Attestation(uint256 submissionId,bytes32 rolloutsCidHash,bytes32 proofsHash,uint256 policyStep,bool accepted)"
    );
    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    uint256 private constant _MAX_BATCH = 16;
    uint256 private constant _MAX_LEAVES = 256; // leaves per claim or release call

    // one slot: 32 + 40 + 32 + 128 = 232 bits
    struct RootRecord {
        uint32 poolId;
        uint40 recordedAt;
        uint32 leafCount;
        uint128 remaining;
    }

    // one slot: 96 + 128 + 8 = 232 bits
    struct PoolRule {
        uint96 reward;
        uint128 budget;
        bool set;
    }

    // one slot per (submission, validator): 96 + 8 + 8 bits. state: 0 none, 1 reserved, 2 settled
    struct Record {
        uint96 amount;
        uint8 state;
        bool slashed;
    }

    // one slot: the pool's reward per resolved challenge (set once)
    struct VoterRule {
        uint96 reward;
        bool set;
    }

    IERC20 private immutable _token;
    ITaskLedger private immutable _ledger;
    IStakeManager private immutable _stakeManager;
    INodeRegistry private immutable _registry;

    mapping(uint32 poolId => PoolRule) private _rules;
    mapping(uint256 submissionId => mapping(address validator => Record)) private _records;
    uint256 private _attesterSlash;
    uint256 private _voterSlash;
    // the last round of each challenge whose vote of a validator was settled: slashed as losing or paid as winning
    mapping(uint256 challengeId => mapping(address validator => uint16 round)) private _voterSettled;
    mapping(uint32 poolId => VoterRule) private _voterRules;
    // roots by keccak256(pool, root): one pool's trainer cannot take (front-run) a root another pool's will record
    mapping(bytes32 key => RootRecord) private _roots;
    // settled leaves of each root, 256 a word: a claim of consecutive leaves writes one slot per 256
    mapping(bytes32 key => mapping(uint256 word => uint256 bits)) private _settled;

    /// @param admin receives DEFAULT_ADMIN_ROLE (sets the attester slash)
    /// @param ledger_ the TaskLedger whose submissions are attested (also the attestations' EIP-712 domain)
    /// @param attesterSlash_ tokens slashed per accepting attestation of upheld work (capped at the minimum stake)
    /// @param voterSlash_ tokens slashed per vote against a challenge's outcome (capped likewise)
    constructor(address admin, ITaskLedger ledger_, uint256 attesterSlash_, uint256 voterSlash_) {
        _ledger = ledger_;
        _token = IERC20(ledger_.token());
        _stakeManager = IStakeManager(ledger_.stakeManager());
        _registry = INodeRegistry(ledger_.registry());
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _attesterSlash = attesterSlash_;
        emit AttesterSlashSet(attesterSlash_);
        _voterSlash = voterSlash_;
        emit VoterSlashSet(voterSlash_);
    }

    /// @inheritdoc IAttesterBook
    function setAttesterReward(uint32 poolId, uint96 rewardPerAttestation) external {
        address owner = _ledger.pool(poolId).owner;
        if (owner != msg.sender) revert AttesterBookNotPoolOwner(poolId, msg.sender);
        PoolRule storage rule = _rules[poolId];
        if (rule.set) revert AttesterBookRewardAlreadySet(poolId);
        rule.reward = rewardPerAttestation;
        rule.set = true;
        emit AttesterRewardSet(poolId, rewardPerAttestation);
    }

    /// @inheritdoc IAttesterBook
    function fundAttesterRewards(uint32 poolId, uint256 amount) external nonReentrant {
        _ledger.pool(poolId); // reverts TaskLedgerUnknownPool
        PoolRule storage rule = _rules[poolId];
        uint128 budget = rule.budget + SafeCast.toUint128(amount);
        rule.budget = budget;
        emit AttesterRewardsFunded(poolId, msg.sender, amount, budget);
        _token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc IAttesterBook
    function recordAttestations(uint256 submissionId, address[] calldata validators) external {
        uint256 n = validators.length;
        if (n == 0 || n > _MAX_BATCH) revert AttesterBookBadBatch(n);
        ITaskLedger.TaskView memory t = _ledger.task(submissionId);
        if (_ledger.pool(t.poolId).params.trainer != msg.sender) revert AttesterBookNotTrainer(submissionId, msg.sender);
        if (t.windowEnd == 0 || block.timestamp >= t.windowEnd) revert AttesterBookWindowClosed(submissionId, t.windowEnd);
        address workerOwner = _registry.ownerOf(t.node);
        PoolRule memory rule = _rules[t.poolId];
        uint256 needed = uint256(rule.reward) * n;
        if (rule.budget < needed) revert AttesterBookInsufficientBudget(t.poolId, rule.budget, needed);
        for (uint256 i; i < n;) {
            address v = validators[i];
            // a validator holding several of the submission's slots is listed once per slot, adjacently, and
            // paid per slot: paying per key would make splitting one stake over many keys pay (issue 33)
            uint256 j = i + 1;
            while (j < n && validators[j] == v) ++j;
            (address owner, INodeRegistry.Role role,) = _registry.nodeCore(v);
            if (role != INodeRegistry.Role.Validator || owner == workerOwner) {
                revert AttesterBookNotAttester(submissionId, v);
            }
            Record storage r = _records[submissionId][v];
            if (r.state != 0) revert AttesterBookBadRecord(submissionId, v);
            uint96 amount = SafeCast.toUint96(uint256(rule.reward) * (j - i));
            r.amount = amount;
            r.state = 1;
            emit AttestationRecorded(submissionId, v, amount);
            i = j;
        }
        // needed <= budget < 2**128
        _rules[t.poolId].budget = rule.budget - uint128(needed);
    }

    /// @inheritdoc IAttesterBook
    function recordAttestationRoot(uint32 poolId, bytes32 root, uint32 leafCount, uint128 total, string calldata leavesCid)
        external
    {
        if (_ledger.pool(poolId).params.trainer != msg.sender) revert AttesterBookNotPoolTrainer(poolId, msg.sender);
        bytes32 key = _rootKey(poolId, root);
        if (root == bytes32(0) || leafCount == 0 || _roots[key].recordedAt != 0) revert AttesterBookBadRoot(root);
        PoolRule storage rule = _rules[poolId];
        uint128 budget = rule.budget;
        if (budget < total) revert AttesterBookInsufficientBudget(poolId, budget, total);
        rule.budget = budget - total;
        _roots[key] = RootRecord({
            poolId: poolId, recordedAt: uint40(block.timestamp), leafCount: leafCount, remaining: total
        });
        emit AttestationRootRecorded(poolId, root, leafCount, total, leavesCid);
    }

    /// @inheritdoc IAttesterBook
    function claimAttesterRewards(
        uint32 poolId,
        bytes32 root,
        address validator,
        AttestationLeaf[] calldata leaves,
        bytes32[] calldata proof,
        bool[] calldata proofFlags
    ) external nonReentrant returns (uint256 total) {
        bytes32 key = _rootKey(poolId, root);
        RootRecord memory rr = _settleLeaves(key, root, validator, leaves, proof, proofFlags);
        address owner;
        (total, owner) = _payLeaves(rr, validator, leaves);
        _spend(key, root, rr, total);
        _token.safeTransfer(owner, total);
    }

    /// @inheritdoc IAttesterBook
    function releaseAttesterRewards(
        uint32 poolId,
        bytes32 root,
        address validator,
        AttestationLeaf[] calldata leaves,
        bytes32[] calldata proof,
        bool[] calldata proofFlags
    ) external returns (uint256 total) {
        bytes32 key = _rootKey(poolId, root);
        RootRecord memory rr = _settleLeaves(key, root, validator, leaves, proof, proofFlags);
        total = _releasableLeaves(rr, validator, leaves);
        _spend(key, root, rr, total);
        // what the root reserved came out of this pool's budget, which therefore has room for it
        _rules[rr.poolId].budget += uint128(total);
    }

    /// @inheritdoc IAttesterBook
    function attestationRoot(uint32 poolId, bytes32 root)
        external
        view
        returns (uint40 recordedAt, uint32 leafCount, uint128 remaining)
    {
        RootRecord memory rr = _roots[_rootKey(poolId, root)];
        return (rr.recordedAt, rr.leafCount, rr.remaining);
    }

    /// @inheritdoc IAttesterBook
    function leafSettled(uint32 poolId, bytes32 root, uint256 index) external view returns (bool) {
        return _settled[_rootKey(poolId, root)][index >> 8] & (1 << (index & 0xff)) != 0;
    }

    /// @inheritdoc IAttesterBook
    function claimAttesterReward(uint256 submissionId, address validator)
        external
        nonReentrant
        returns (uint256 amount)
    {
        Record storage r = _records[submissionId][validator];
        if (r.state != 1) revert AttesterBookBadRecord(submissionId, validator);
        // final and payable: the worker was paid, or its reward is claimable now (window closed, no open
        // challenge, not upheld, not voided)
        ITaskLedger.TaskStatus status = _ledger.task(submissionId).status;
        if (status != ITaskLedger.TaskStatus.Paid && _ledger.claimable(submissionId) == 0) {
            revert AttesterBookNotPayable(submissionId, validator);
        }
        amount = r.amount;
        r.state = 2;
        address owner = _registry.ownerOf(validator);
        emit AttesterRewardPaid(submissionId, validator, owner, amount);
        _token.safeTransfer(owner, amount);
    }

    /// @inheritdoc IAttesterBook
    function releaseAttesterReward(uint256 submissionId, address validator) external returns (uint256 amount) {
        Record storage r = _records[submissionId][validator];
        if (r.state != 1) revert AttesterBookBadRecord(submissionId, validator);
        ITaskLedger.TaskView memory t = _ledger.task(submissionId);
        if (t.status != ITaskLedger.TaskStatus.Upheld && t.status != ITaskLedger.TaskStatus.Voided) {
            revert AttesterBookNotReleasable(submissionId, validator);
        }
        amount = _release(t.poolId, submissionId, validator, r);
    }

    /// @inheritdoc IAttesterBook
    function slashAttester(
        uint256 submissionId,
        address validator,
        bytes32 rolloutsCidHash,
        bytes32 proofsHash,
        uint256 policyStep,
        bytes calldata signature
    ) external nonReentrant returns (uint256 slashed) {
        ITaskLedger.TaskView memory t = _ledger.task(submissionId);
        if (t.status != ITaskLedger.TaskStatus.Upheld) revert AttesterBookNotUpheld(submissionId);
        _checkSigner(_digest(submissionId, rolloutsCidHash, proofsHash, policyStep, true), signature, validator);
        Record storage r = _records[submissionId][validator];
        if (r.slashed) revert AttesterBookAlreadySlashed(submissionId, validator);
        r.slashed = true;
        if (r.state == 1) _release(t.poolId, submissionId, validator, r); // no pay for attesting bad work
        slashed = _slashValidator(validator, _attesterSlash);
        emit AttesterSlashed(submissionId, validator, msg.sender, slashed);
    }

    /// @inheritdoc IAttesterBook
    function slashVoter(uint256 challengeId, address validator) external nonReentrant returns (uint256 slashed) {
        ITaskLedger.ChallengeView memory c = _ledger.challengeInfo(challengeId);
        (uint16 round, bool uphold) = _ledger.voteOf(challengeId, validator);
        bool resolved = c.status == ITaskLedger.ChallengeStatus.Upheld || c.status == ITaskLedger.ChallengeStatus.Rejected;
        // only the latest round keeps its outcome; a vote recorded for it must be on the losing side; a round that
        // missed its quorum (NoQuorum) has no outcome, so no voter of it lost (issue 33)
        if (!resolved || round != c.round || uphold == (c.status == ITaskLedger.ChallengeStatus.Upheld)) {
            revert AttesterBookNotLosingVoter(challengeId, validator);
        }
        if (_voterSettled[challengeId][validator] == round) revert AttesterBookAlreadySlashed(challengeId, validator);
        _voterSettled[challengeId][validator] = round;
        slashed = _slashValidator(validator, _voterSlash);
        emit VoterSlashed(challengeId, validator, round, slashed);
    }

    /// @inheritdoc IAttesterBook
    function setVoterReward(uint32 poolId, uint96 rewardPerChallenge) external {
        ITaskLedger.PoolView memory p = _ledger.pool(poolId);
        if (p.owner != msg.sender) revert AttesterBookNotPoolOwner(poolId, msg.sender);
        VoterRule storage rule = _voterRules[poolId];
        if (rule.set) revert AttesterBookVoterRewardAlreadySet(poolId);
        // below the bond: a sham challenge's friendly voters, even holding the whole winning side, win back less
        // than the bond the sham forfeits
        if (rewardPerChallenge >= p.params.challengeBond) {
            revert AttesterBookVoterRewardTooHigh(poolId, rewardPerChallenge, p.params.challengeBond);
        }
        rule.reward = rewardPerChallenge;
        rule.set = true;
        emit VoterRewardSet(poolId, rewardPerChallenge);
    }

    /// @inheritdoc IAttesterBook
    function claimVoterReward(uint256 challengeId, address validator) external nonReentrant returns (uint256 amount) {
        ITaskLedger.ChallengeView memory c = _ledger.challengeInfo(challengeId);
        bool upheld = c.status == ITaskLedger.ChallengeStatus.Upheld;
        if (!upheld && c.status != ITaskLedger.ChallengeStatus.Rejected) {
            revert AttesterBookNotWinningVoter(challengeId, validator);
        }
        (uint16 round, bool uphold) = _ledger.voteOf(challengeId, validator);
        // the challenger's vote is its challenge (counted for upholding; it cannot vote in its own round)
        bool won = (round == c.round && uphold == upheld) || (upheld && validator == c.challenger);
        if (!won) revert AttesterBookNotWinningVoter(challengeId, validator);
        if (_voterSettled[challengeId][validator] == c.round) revert AttesterBookVoteSettled(challengeId, validator);
        _voterSettled[challengeId][validator] = c.round;
        uint32 poolId = _ledger.task(challengeId).poolId;
        uint256 reward = _voterRules[poolId].reward;
        if (reward == 0) revert AttesterBookNoVoterReward(poolId);
        // the winning side's weight at the snapshot includes this voter's: the shares add up to at most `reward`
        uint256 weight = _stakeManager.validatorWeightAt(validator, c.snapshotBlock);
        amount = reward * weight / (upheld ? c.weightFor : c.weightAgainst);
        uint128 budget = _rules[poolId].budget;
        if (budget < amount) revert AttesterBookInsufficientBudget(poolId, budget, amount);
        _rules[poolId].budget = budget - uint128(amount); // amount <= budget < 2**128
        address owner = _registry.ownerOf(validator);
        emit VoterRewardPaid(challengeId, validator, owner, c.round, amount);
        _token.safeTransfer(owner, amount);
    }

    /// @inheritdoc IAttesterBook
    function voterReward(uint32 poolId) external view returns (uint256) {
        return _voterRules[poolId].reward;
    }

    /// @inheritdoc IAttesterBook
    function setVoterSlash(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _voterSlash = amount;
        emit VoterSlashSet(amount);
    }

    /// @inheritdoc IAttesterBook
    function voterSlash() external view returns (uint256) {
        return _voterSlash;
    }

    /// @inheritdoc IAttesterBook
    function setAttesterSlash(uint256 amount) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _attesterSlash = amount;
        emit AttesterSlashSet(amount);
    }

    /// @inheritdoc IAttesterBook
    function poolRule(uint32 poolId) external view returns (uint256 rewardPerAttestation, uint256 budget) {
        PoolRule memory rule = _rules[poolId];
        return (rule.reward, rule.budget);
    }

    /// @inheritdoc IAttesterBook
    function recorded(uint256 submissionId, address validator) external view returns (uint256) {
        Record memory r = _records[submissionId][validator];
        return r.state == 1 ? r.amount : 0;
    }

    /// @inheritdoc IAttesterBook
    function attesterSlash() external view returns (uint256) {
        return _attesterSlash;
    }

    /// @inheritdoc IAttesterBook
    function attestationDigest(
        uint256 submissionId,
        bytes32 rolloutsCidHash,
        bytes32 proofsHash,
        uint256 policyStep,
        bool accepted
    ) external view returns (bytes32) {
        return _digest(submissionId, rolloutsCidHash, proofsHash, policyStep, accepted);
    }

    function _release(uint32 poolId, uint256 submissionId, address validator, Record storage r)
        private
        returns (uint256 amount)
    {
        amount = r.amount;
        r.state = 2;
        // the amount came out of this pool's budget, which therefore has room for it
        _rules[poolId].budget += uint128(amount);
        emit AttesterRewardReleased(submissionId, validator, amount);
    }

    /// @dev Checks `leaves` of `root` against the multiproof and marks each settled (reverting on one settled or
    /// out of range); returns the root's record.
    function _settleLeaves(
        bytes32 key,
        bytes32 root,
        address validator,
        AttestationLeaf[] calldata leaves,
        bytes32[] calldata proof,
        bool[] calldata proofFlags
    ) private returns (RootRecord memory rr) {
        rr = _roots[key];
        if (rr.recordedAt == 0) revert AttesterBookUnknownRoot(root);
        uint256 n = leaves.length;
        if (n == 0 || n > _MAX_LEAVES) revert AttesterBookBadBatch(n);
        if (!MerkleProof.multiProofVerifyCalldata(proof, proofFlags, root, _leafHashes(validator, leaves))) {
            revert AttesterBookBadProof(root);
        }
        _markSettled(key, root, rr.leafCount, leaves);
    }

    /// @dev The leaves' hashes: keccak256(keccak256(abi.encode(index, submissionId, validator, amount))).
    function _leafHashes(address validator, AttestationLeaf[] calldata leaves)
        private
        pure
        returns (bytes32[] memory hashes)
    {
        hashes = new bytes32[](leaves.length);
        for (uint256 i; i < leaves.length; ++i) {
            AttestationLeaf calldata leaf = leaves[i];
            hashes[i] = keccak256(
                bytes.concat(keccak256(abi.encode(leaf.index, leaf.submissionId, validator, leaf.amount)))
            );
        }
    }

    /// @dev Sets the settled bit of each leaf, reverting on one out of range or settled already.
    function _markSettled(bytes32 key, bytes32 root, uint32 leafCount, AttestationLeaf[] calldata leaves) private {
        mapping(uint256 word => uint256 bits) storage settled = _settled[key];
        uint256 word = type(uint256).max; // the bitmap word in hand (a claim's leaves are mostly consecutive)
        uint256 bits = 0;
        for (uint256 i; i < leaves.length; ++i) {
            uint256 index = leaves[i].index;
            if (index >= leafCount) revert AttesterBookLeafSettled(root, index);
            if (index >> 8 != word) {
                if (word != type(uint256).max) settled[word] = bits;
                word = index >> 8;
                bits = settled[word];
            }
            uint256 bit = 1 << (index & 0xff);
            if (bits & bit != 0) revert AttesterBookLeafSettled(root, index);
            bits |= bit;
        }
        settled[word] = bits;
    }

    /// @dev The total of `leaves` (of `rr`), each payable under a record's rules, and the validator's owner.
    function _payLeaves(RootRecord memory rr, address validator, AttestationLeaf[] calldata leaves)
        private
        returns (uint256 total, address owner)
    {
        INodeRegistry.Role role;
        (owner, role,) = _registry.nodeCore(validator);
        bool attester = role == INodeRegistry.Role.Validator;
        for (uint256 i; i < leaves.length; ++i) {
            AttestationLeaf calldata leaf = leaves[i];
            ITaskLedger.TaskView memory t = _ledger.task(leaf.submissionId);
            if (!_leafValid(rr, t, attester, owner)) revert AttesterBookNotAttester(leaf.submissionId, validator);
            if (t.status != ITaskLedger.TaskStatus.Paid && _ledger.claimable(leaf.submissionId) == 0) {
                revert AttesterBookNotPayable(leaf.submissionId, validator);
            }
            total += leaf.amount;
            emit AttesterRewardPaid(leaf.submissionId, validator, owner, leaf.amount);
        }
    }

    /// @dev The total of `leaves` (of `rr`), each one that can never be paid (upheld, voided, or breaking a rule).
    function _releasableLeaves(RootRecord memory rr, address validator, AttestationLeaf[] calldata leaves)
        private
        returns (uint256 total)
    {
        (address owner, INodeRegistry.Role role,) = _registry.nodeCore(validator);
        bool attester = role == INodeRegistry.Role.Validator;
        for (uint256 i; i < leaves.length; ++i) {
            AttestationLeaf calldata leaf = leaves[i];
            ITaskLedger.TaskView memory t = _ledger.task(leaf.submissionId);
            if (
                _leafValid(rr, t, attester, owner) && t.status != ITaskLedger.TaskStatus.Upheld
                    && t.status != ITaskLedger.TaskStatus.Voided
            ) revert AttesterBookNotReleasable(leaf.submissionId, validator);
            total += leaf.amount;
            emit AttesterRewardReleased(leaf.submissionId, validator, leaf.amount);
        }
    }

    /// @dev A leaf follows the rules of a recorded attestation: the root's pool's submission, the root recorded
    /// inside its window, by a registered validator (`attester`) whose `owner` is not the worker's.
    function _leafValid(RootRecord memory rr, ITaskLedger.TaskView memory t, bool attester, address owner)
        private
        view
        returns (bool)
    {
        if (!attester || t.poolId != rr.poolId || rr.recordedAt >= t.windowEnd) return false;
        return owner != _registry.ownerOf(t.node);
    }

    function _spend(bytes32 key, bytes32 root, RootRecord memory rr, uint256 amount) private {
        if (rr.remaining < amount) revert AttesterBookRootSpent(root, rr.remaining, amount);
        _roots[key].remaining = rr.remaining - uint128(amount); // amount <= remaining < 2**128
    }

    function _rootKey(uint32 poolId, bytes32 root) private pure returns (bytes32) {
        return keccak256(abi.encode(poolId, root));
    }

    /// @dev Slashes `amount` (at most the validators' minimum stake) from `validator`; the caller reports it.
    function _slashValidator(address validator, uint256 amount) private returns (uint256) {
        uint256 cap = _stakeManager.minStake(INodeRegistry.Role.Validator);
        return _stakeManager.slash(validator, amount < cap ? amount : cap, msg.sender);
    }

    function _checkSigner(bytes32 digest, bytes calldata signature, address validator) private pure {
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, signature);
        if (err != ECDSA.RecoverError.NoError || signer != validator) {
            revert AttesterBookBadSignature(validator, signer);
        }
    }

    /// @dev The agents' attestation digest: EIP-712 with the TaskLedger as verifying contract.
    function _digest(
        uint256 submissionId,
        bytes32 rolloutsCidHash,
        bytes32 proofsHash,
        uint256 policyStep,
        bool accepted
    ) private view returns (bytes32) {
        bytes32 domain = keccak256(
            abi.encode(
                _DOMAIN_TYPEHASH,
                keccak256("intellect-attestation"),
                keccak256("1"),
                block.chainid,
                address(_ledger)
            )
        );
        bytes32 structHash =
            keccak256(abi.encode(ATTESTATION_TYPEHASH, submissionId, rolloutsCidHash, proofsHash, policyStep, accepted));
        return MessageHashUtils.toTypedDataHash(domain, structHash);
    }
}
