// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title ReentrantOwner (TEST ONLY, never deployed by scripts/deploy.py)
/// @notice A contract that owns nodes (registers them, stakes, unstakes, withdraws, claims rewards through
/// `execute`) and, when tokens reach it through a token hook, re-enters a call chosen in advance with
/// `arm`. It records whether the re-entrant call succeeded and its return or revert data, so a test can
/// assert that the guard refused it (and with which error) while the outer call still completed.
contract ReentrantOwner {
    address public reentryTarget;
    bytes public reentryData;
    uint256 public reentryAttempts;
    bool public lastReentryOk;
    bytes public lastReentryResult;
    uint256 public hookCalls;

    error ReentrantOwnerNoHook(address token);


    /// @notice Asks `token` (a HookToken) to call this contract back on every receipt.
    function listen(address token) external {
        (bool ok,) = token.call(abi.encodeWithSignature("registerHook()"));
        if (!ok) revert ReentrantOwnerNoHook(token);
    }

    /// @notice Re-enter `target` with `data` on the next token receipt (once).
    function arm(address target, bytes calldata data) external {
        reentryTarget = target;
        reentryData = data;
    }

    /// @notice Makes a call as this contract (the node owner); bubbles the revert data up.
    function execute(address target, bytes calldata data) external returns (bytes memory result) {
        bool ok;
        (ok, result) = target.call(data);
        if (!ok) {
            assembly {
                revert(add(result, 32), mload(result))
            }
        }
    }

    /// @notice HookToken's callback: re-enters the armed call once.
    function onTokenReceived(address, uint256) external {
        hookCalls += 1;
        address target = reentryTarget;
        if (target == address(0)) return;
        reentryTarget = address(0);
        reentryAttempts += 1;
        (bool ok, bytes memory result) = target.call(reentryData);
        lastReentryOk = ok;
        lastReentryResult = result;
    }
}
