// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @notice Test-only receiver interface of HookToken (ERC-777 / ERC-677 style "tokens received" hook).
interface ITokenHookReceiver {
    function onTokenReceived(address from, uint256 amount) external;
}

/// @title HookToken (TEST ONLY, never deployed by scripts/deploy.py)
/// @notice An ERC-20 that calls `onTokenReceived` on every contract that receives tokens, the callback that
/// ERC-777 and ERC-677 tokens give a recipient. IntellectToken has no such hook; the security suite deploys
/// StakeManager and TaskLedger over this token to show their reentrancy guards hold when one exists.
contract HookToken is ERC20 {
    /// @notice Contracts that asked to be called back (ERC-777 receivers register in ERC-1820 the same way).
    mapping(address account => bool) public wantsHook;

    constructor() ERC20("Hook", "HOOK") {}

    /// @notice The caller asks to be called back on every receipt.
    function registerHook() external {
        wantsHook[msg.sender] = true;
    }

    /// @notice Anyone may mint: a test token.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        if (wantsHook[to] && from != address(0)) {
            ITokenHookReceiver(to).onTokenReceived(from, value);
        }
    }
}
