// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title INodeRegistry
/// @notice Registry of compute nodes. A node is identified by its node key's address; it is registered
/// by its provider/owner (who may be the node itself) with an EIP-712 signature of the node key proving
/// control of it. The registry keeps an O(1) count of active nodes per role.
interface INodeRegistry {
    /// @notice What a node does in the network. `None` is never a valid registered role.
    enum Role {
        None,
        Worker,
        Validator,
        Trainer,
        Relay
    }

    /// @notice Lifecycle of a node key. `None`: never registered; `Exited`: left (may register again);
    /// `Rotated`: its owner moved the node to a new key (`rotateKey`); the key is retired for good.
    enum Status {
        None,
        Active,
        Exited,
        Rotated
    }

    /// @notice Everything the registry knows about a node.
    struct NodeInfo {
        address owner;
        Role role;
        Status status;
        uint16 vramGiB;
        uint16 gpuCount;
        uint40 registeredAt;
        string gpuModel;
        string endpoint;
    }

    /// @notice Emitted when `node` is registered by `owner`.
    /// @param node the node key's address
    /// @param owner the provider/owner that sent the registration
    /// @param role the node's role
    /// @param gpuModel declared GPU model (e.g. "H100-80GB", "cpu")
    /// @param vramGiB declared VRAM per GPU in GiB
    /// @param gpuCount declared number of GPUs
    /// @param endpoint URI where the node serves (relay URL, worker API), may be empty
    event NodeRegistered(
        address indexed node,
        address indexed owner,
        Role indexed role,
        string gpuModel,
        uint16 vramGiB,
        uint16 gpuCount,
        string endpoint
    );

    /// @notice Emitted when the owner updates a node's hardware class or endpoint.
    event NodeUpdated(address indexed node, string gpuModel, uint16 vramGiB, uint16 gpuCount, string endpoint);

    /// @notice Emitted when the owner takes a node out of the network.
    event NodeExited(address indexed node, address indexed owner, Role indexed role);

    /// @notice Emitted when `owner` moves its node from key `oldNode` to key `newNode` (`rotateKey`): the new key
    /// takes over the registration (role, hardware, endpoint, registration time), the stake and the record;
    /// the old key is retired (status Rotated) and never registered again.
    event NodeKeyRotated(address indexed oldNode, address indexed newNode, address indexed owner, Role role);

    /// @notice Emitted when the deployer sets the stake hook (told of every registration and exit).
    event StakeHookSet(address indexed hook);

    /// @notice Thrown when registering a node that is already active.
    error NodeRegistryAlreadyActive(address node);

    /// @notice Thrown when a node must be active and is not.
    error NodeRegistryNotActive(address node);

    /// @notice Thrown when `caller` acts on `node` but is not its owner.
    error NodeRegistryNotOwner(address node, address caller);

    /// @notice Thrown when `node` cannot take a registration: it was rotated away (retired for good), or, as the
    /// new key of a rotation, it was ever registered.
    error NodeRegistryKeyUsed(address node);

    /// @notice Thrown for the role `None` (or any invalid role).
    error NodeRegistryInvalidRole(uint8 role);

    /// @notice Thrown when the registration signature's `deadline` has passed.
    error NodeRegistryExpiredSignature(uint256 deadline);

    /// @notice Thrown when the registration signature was made by `signer`, not by `node`.
    error NodeRegistryInvalidSignature(address node, address signer);

    /// @notice Thrown for a zero node address.
    error NodeRegistryZeroAddress();

    /// @notice Thrown when `caller` (not the deployer) sets the stake hook, or when it is set already.
    error NodeRegistryHookNotSettable(address caller, address current);

    /// @notice Thrown when a string field is longer than allowed (bounded storage).
    /// @param field "gpuModel" or "endpoint"
    error NodeRegistryStringTooLong(string field, uint256 length, uint256 maxLength);

    /// @notice Registers `node`, sent by its owner. `nodeSig` is the node key's EIP-712 signature over
    /// Register(address node,address owner,uint8 role,uint256 deadline,uint256 nonce) with the node's current
    /// nonce (see `nonces`). Owner and node may be the same address.
    /// @param node the node key's address
    /// @param role Worker, Validator, Trainer or Relay
    /// @param gpuModel declared GPU model (<= 64 bytes)
    /// @param vramGiB declared VRAM per GPU in GiB
    /// @param gpuCount declared number of GPUs
    /// @param endpoint URI of the node (<= 256 bytes)
    /// @param deadline last timestamp at which the signature is valid
    /// @param nodeSig 65-byte ECDSA signature by the node key
    function register(
        address node,
        Role role,
        string calldata gpuModel,
        uint16 vramGiB,
        uint16 gpuCount,
        string calldata endpoint,
        uint256 deadline,
        bytes calldata nodeSig
    ) external;

    /// @notice Updates the hardware class and endpoint of an active node. Only its owner.
    function update(
        address node,
        string calldata gpuModel,
        uint16 vramGiB,
        uint16 gpuCount,
        string calldata endpoint
    ) external;

    /// @notice Takes an active node out of the network. Only its owner. Its stake stays in the StakeManager
    /// (still slashable) until withdrawn there.
    function exit(address node) external;

    /// @notice Moves the active node `oldNode` to the key `newNode`. Only the node's owner, who needs neither the
    /// old key nor its consent (a lost or leaked node key is recovered this way); `newNodeSig` is the new key's
    /// consent, the same EIP-712 message as `register` (Register(newNode, owner, role of the node, deadline,
    /// nonce of newNode)). `newNode` must never have been registered. The new key takes over the registration
    /// (role, hardware, endpoint, registration time) and, through the stake hook, the stake, unbonding, open
    /// challenge locks and validator weight; slashes of the old key's earlier work follow the stake
    /// (`currentKey`). The old key is retired (status Rotated; `register` refuses it) but keeps its owner, so
    /// its pending rewards stay claimable by the owner. The old key's open leases stay with it (it may still
    /// submit them until they expire; whatever it submits is slashable through the new key).
    /// @param oldNode the node's current key
    /// @param newNode the key the node moves to
    /// @param deadline last timestamp at which `newNodeSig` is valid
    /// @param newNodeSig 65-byte ECDSA signature by `newNode`
    function rotateKey(address oldNode, address newNode, uint256 deadline, bytes calldata newNodeSig) external;

    /// @notice The key that holds the node `node` was rotated into (`node` itself while it was never rotated away):
    /// O(1) however many rotations. Slashes of a retired key's work land on this key's stake.
    function currentKey(address node) external view returns (address);

    /// @notice Sets, once, the contract told of every registration and exit (the StakeManager: it keeps the
    /// validators' stake weights that votes count by). Only the deployer.
    function setStakeHook(address hook) external;

    /// @notice The stake hook (zero until set).
    function stakeHook() external view returns (address);

    /// @notice Full record of `node`.
    function nodeInfo(address node) external view returns (NodeInfo memory);

    /// @notice The hot fields of `node` in one storage read: owner, role and status.
    function nodeCore(address node) external view returns (address owner, Role role, Status status);

    /// @notice Owner of `node` (zero if never registered).
    function ownerOf(address node) external view returns (address);

    /// @notice Whether `node` is active with role `role`.
    function isActive(address node, Role role) external view returns (bool);

    /// @notice Number of active nodes with role `role` (O(1) counter).
    function activeCount(Role role) external view returns (uint256);

    /// @notice Current registration nonce of `node` (part of the signed message).
    function nonces(address node) external view returns (uint256);

    /// @notice The EIP-712 digest `node` must sign to be registered by `owner`.
    function registrationDigest(address node, address owner, Role role, uint256 deadline)
        external
        view
        returns (bytes32);
}
