// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title IIntellectToken
/// @notice The protocol's ERC-20 (with EIP-2612 permit) used for stake, pool rewards and challenge bonds.
/// Minting is restricted to MINTER_ROLE. Dev/test deployments enable a rate-limited faucet at construction.
interface IIntellectToken {
    /// @notice Emitted when the faucet mints `amount` to `account`.
    /// @param account receiver of the drip
    /// @param amount tokens minted
    /// @param nextDripAt earliest time `account` may drip again
    event FaucetDripped(address indexed account, uint256 amount, uint256 nextDripAt);

    /// @notice Thrown when `drip` is called on a deployment built without a faucet.
    error IntellectTokenFaucetDisabled();

    /// @notice Thrown when `account` drips again before its cooldown ends at `availableAt`.
    error IntellectTokenFaucetCooldown(address account, uint256 availableAt);

    /// @notice Thrown by the constructor when a faucet is enabled with a zero amount or cooldown.
    error IntellectTokenInvalidFaucet(uint256 amount, uint256 cooldown);

    /// @notice Mints `amount` tokens to `to`. Only MINTER_ROLE.
    function mint(address to, uint256 amount) external;

    /// @notice Mints the faucet amount to the caller, at most once per cooldown. Only when the faucet is enabled.
    function drip() external;

    /// @notice Whether this deployment has a faucet (fixed at construction; dev/test deployments only).
    function faucetEnabled() external view returns (bool);

    /// @notice Tokens minted per drip.
    function faucetAmount() external view returns (uint256);

    /// @notice Seconds an address waits between drips.
    function faucetCooldown() external view returns (uint256);

    /// @notice Earliest time `account` may drip again (0 if it never dripped).
    function nextDripAt(address account) external view returns (uint256);
}
