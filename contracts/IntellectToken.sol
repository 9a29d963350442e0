// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/ERC20Permit.sol";
import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";

import {IIntellectToken} from "./interfaces/IIntellectToken.sol";

/// @title IntellectToken
/// @notice ERC-20 with EIP-2612 permit, minted by MINTER_ROLE. A faucet (a fixed amount per cooldown per
/// address, minted by the token itself) exists only when the deployment enables it (dev/test networks).
contract IntellectToken is ERC20, ERC20Permit, AccessControl, IIntellectToken {
    /// @notice Role allowed to mint.
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");

    /// @inheritdoc IIntellectToken
    bool public immutable faucetEnabled;
    /// @inheritdoc IIntellectToken
    uint256 public immutable faucetAmount;
    /// @inheritdoc IIntellectToken
    uint256 public immutable faucetCooldown;

    mapping(address account => uint256) private _nextDripAt;

    /// @param admin receives DEFAULT_ADMIN_ROLE and MINTER_ROLE
    /// @param faucet_ enable the faucet (dev/test deployments only)
    /// @param faucetAmount_ tokens per drip (ignored without faucet)
    /// @param faucetCooldown_ seconds between drips of one address (ignored without faucet)
    constructor(address admin, bool faucet_, uint256 faucetAmount_, uint256 faucetCooldown_)
        ERC20("Intellect", "INTL")
        ERC20Permit("Intellect")
    {
        if (faucet_ && (faucetAmount_ == 0 || faucetCooldown_ == 0)) {
            revert IntellectTokenInvalidFaucet(faucetAmount_, faucetCooldown_);
        }
        faucetEnabled = faucet_;
        faucetAmount = faucet_ ? faucetAmount_ : 0;
        faucetCooldown = faucet_ ? faucetCooldown_ : 0;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _grantRole(MINTER_ROLE, admin);
    }

    /// @inheritdoc IIntellectToken
    function mint(address to, uint256 amount) external onlyRole(MINTER_ROLE) {
        _mint(to, amount);
    }

    /// @inheritdoc IIntellectToken
    function drip() external {
        if (!faucetEnabled) revert IntellectTokenFaucetDisabled();
        uint256 availableAt = _nextDripAt[msg.sender];
        if (block.timestamp < availableAt) revert IntellectTokenFaucetCooldown(msg.sender, availableAt);
        uint256 next = block.timestamp + faucetCooldown;
        _nextDripAt[msg.sender] = next;
        _mint(msg.sender, faucetAmount);
        emit FaucetDripped(msg.sender, faucetAmount, next);
    }

    /// @inheritdoc IIntellectToken
    function nextDripAt(address account) external view returns (uint256) {
        return _nextDripAt[account];
    }
}
