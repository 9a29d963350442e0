// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";

import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";

/// @title NodeRegistry
/// @notice Nodes keyed by their node key's address; registered by their owner with the node key's EIP-712
/// signature. The hot fields (owner, role, status, hardware numbers, time) share one storage slot so the
/// ledger's eligibility check costs one read.
contract NodeRegistry is EIP712, Nonces, INodeRegistry {
    /// @notice EIP-712 type of the node key's consent to be registered by `owner`.
    bytes32 public constant REGISTER_TYPEHASH =
        keccak256("Register(address node,address owner,uint8 role,uint256 deadline,uint256 nonce)");

    /// @notice Longest accepted `gpuModel`, in bytes.
    uint256 public constant MAX_GPU_MODEL_LENGTH = 64;
    /// @notice Longest accepted `endpoint`, in bytes.
    uint256 public constant MAX_ENDPOINT_LENGTH = 256;

    // owner 160 + role 8 + status 8 + vramGiB 16 + gpuCount 16 + registeredAt 40 = 248 bits: one slot.
    struct Core {
        address owner;
        Role role;
        Status status;
        uint16 vramGiB;
        uint16 gpuCount;
        uint40 registeredAt;
    }

    mapping(address node => Core) private _core;
    mapping(address node => string) private _gpuModel;
    mapping(address node => string) private _endpoint;
    mapping(Role role => uint256) private _activeCount;
    // key rotation (issue 36): every key a node was rotated into points at the node's first key (its root); the
    // root points at the node's current key. `currentKey` is two reads however many times a node rotated.
    mapping(address key => address root) private _rootOf;
    mapping(address root => address key) private _currentOf;
    address private immutable _deployer;
    IStakeManager private _stakeHook;

    constructor() EIP712("IntellectNodeRegistry", "1") {
        _deployer = msg.sender;
    }

    /// @inheritdoc INodeRegistry
    function register(
        address node,
        Role role,
        string calldata gpuModel,
        uint16 vramGiB,
        uint16 gpuCount,
        string calldata endpoint,
        uint256 deadline,
        bytes calldata nodeSig
    ) external {
        if (node == address(0)) revert NodeRegistryZeroAddress();
        if (role == Role.None) revert NodeRegistryInvalidRole(uint8(role));
        Status status = _core[node].status;
        if (status == Status.Active) revert NodeRegistryAlreadyActive(node);
        if (status == Status.Rotated) revert NodeRegistryKeyUsed(node);
        if (block.timestamp > deadline) revert NodeRegistryExpiredSignature(deadline);
        _checkStrings(gpuModel, endpoint);

        _verifyConsent(node, role, deadline, nodeSig);

        _core[node] = Core({
            owner: msg.sender,
            role: role,
            status: Status.Active,
            vramGiB: vramGiB,
            gpuCount: gpuCount,
            registeredAt: uint40(block.timestamp)
        });
        _gpuModel[node] = gpuModel;
        _endpoint[node] = endpoint;
        _activeCount[role] += 1;
        emit NodeRegistered(node, msg.sender, role, gpuModel, vramGiB, gpuCount, endpoint);
        _notifyStake(node);
    }

    /// @inheritdoc INodeRegistry
    function update(
        address node,
        string calldata gpuModel,
        uint16 vramGiB,
        uint16 gpuCount,
        string calldata endpoint
    ) external {
        Core storage core = _activeOwned(node);
        _checkStrings(gpuModel, endpoint);
        core.vramGiB = vramGiB;
        core.gpuCount = gpuCount;
        _gpuModel[node] = gpuModel;
        _endpoint[node] = endpoint;
        emit NodeUpdated(node, gpuModel, vramGiB, gpuCount, endpoint);
    }

    /// @inheritdoc INodeRegistry
    function exit(address node) external {
        Core storage core = _activeOwned(node);
        core.status = Status.Exited;
        Role role = core.role;
        _activeCount[role] -= 1;
        emit NodeExited(node, msg.sender, role);
        _notifyStake(node);
    }

    /// @inheritdoc INodeRegistry
    function rotateKey(address oldNode, address newNode, uint256 deadline, bytes calldata newNodeSig) external {
        Core storage old = _activeOwned(oldNode);
        if (newNode == address(0)) revert NodeRegistryZeroAddress();
        // never registered: no stake, weight, nonce-bound consent or history of its own to merge
        if (_core[newNode].status != Status.None) revert NodeRegistryKeyUsed(newNode);
        if (block.timestamp > deadline) revert NodeRegistryExpiredSignature(deadline);
        Core memory core = old;
        _verifyConsent(newNode, core.role, deadline, newNodeSig);

        old.status = Status.Rotated; // keeps its owner: the old key's rewards stay claimable by the owner
        _core[newNode] = core; // same owner, role, hardware and registration time; Active
        _gpuModel[newNode] = _gpuModel[oldNode];
        _endpoint[newNode] = _endpoint[oldNode];
        address root = _rootOf[oldNode];
        if (root == address(0)) root = oldNode;
        _rootOf[newNode] = root;
        _currentOf[root] = newNode;
        emit NodeKeyRotated(oldNode, newNode, msg.sender, core.role);
        IStakeManager hook = _stakeHook;
        if (address(hook) != address(0)) hook.nodeRotated(oldNode, newNode);
    }

    /// @inheritdoc INodeRegistry
    function currentKey(address node) external view returns (address) {
        address root = _rootOf[node];
        if (root == address(0)) root = node;
        address current = _currentOf[root];
        return current == address(0) ? node : current;
    }

    /// @inheritdoc INodeRegistry
    function setStakeHook(address hook) external {
        address current = address(_stakeHook);
        if (msg.sender != _deployer || current != address(0)) revert NodeRegistryHookNotSettable(msg.sender, current);
        if (hook == address(0)) revert NodeRegistryZeroAddress();
        _stakeHook = IStakeManager(hook);
        emit StakeHookSet(hook);
    }

    /// @inheritdoc INodeRegistry
    function stakeHook() external view returns (address) {
        return address(_stakeHook);
    }

    /// @inheritdoc INodeRegistry
    function nodeInfo(address node) external view returns (NodeInfo memory) {
        Core memory core = _core[node];
        return NodeInfo({
            owner: core.owner,
            role: core.role,
            status: core.status,
            vramGiB: core.vramGiB,
            gpuCount: core.gpuCount,
            registeredAt: core.registeredAt,
            gpuModel: _gpuModel[node],
            endpoint: _endpoint[node]
        });
    }

    /// @inheritdoc INodeRegistry
    function nodeCore(address node) external view returns (address owner, Role role, Status status) {
        Core storage core = _core[node];
        return (core.owner, core.role, core.status);
    }

    /// @inheritdoc INodeRegistry
    function ownerOf(address node) external view returns (address) {
        return _core[node].owner;
    }

    /// @inheritdoc INodeRegistry
    function isActive(address node, Role role) external view returns (bool) {
        Core storage core = _core[node];
        return core.status == Status.Active && core.role == role;
    }

    /// @inheritdoc INodeRegistry
    function activeCount(Role role) external view returns (uint256) {
        return _activeCount[role];
    }

    /// @inheritdoc INodeRegistry
    function nonces(address node) public view override(Nonces, INodeRegistry) returns (uint256) {
        return super.nonces(node);
    }

    /// @inheritdoc INodeRegistry
    function registrationDigest(address node, address owner, Role role, uint256 deadline)
        external
        view
        returns (bytes32)
    {
        return _hashTypedDataV4(
            keccak256(abi.encode(REGISTER_TYPEHASH, node, owner, uint8(role), deadline, nonces(node)))
        );
    }

    /// @dev Checks that the node key signed its registration by msg.sender (and consumes its nonce).
    function _verifyConsent(address node, Role role, uint256 deadline, bytes calldata nodeSig) private {
        bytes32 digest = _hashTypedDataV4(
            keccak256(abi.encode(REGISTER_TYPEHASH, node, msg.sender, uint8(role), deadline, _useNonce(node)))
        );
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, nodeSig);
        if (err != ECDSA.RecoverError.NoError || signer != node) revert NodeRegistryInvalidSignature(node, signer);
    }

    /// @dev Tells the stake manager that `node`'s role or status changed (its validator weight follows them).
    function _notifyStake(address node) private {
        IStakeManager hook = _stakeHook;
        if (address(hook) != address(0)) hook.nodeChanged(node);
    }

    function _activeOwned(address node) private view returns (Core storage core) {
        core = _core[node];
        if (core.status != Status.Active) revert NodeRegistryNotActive(node);
        if (core.owner != msg.sender) revert NodeRegistryNotOwner(node, msg.sender);
    }

    function _checkStrings(string calldata gpuModel, string calldata endpoint) private pure {
        if (bytes(gpuModel).length > MAX_GPU_MODEL_LENGTH) {
            revert NodeRegistryStringTooLong("gpuModel", bytes(gpuModel).length, MAX_GPU_MODEL_LENGTH);
        }
        if (bytes(endpoint).length > MAX_ENDPOINT_LENGTH) {
            revert NodeRegistryStringTooLong("endpoint", bytes(endpoint).length, MAX_ENDPOINT_LENGTH);
        }
    }
}
