// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice An attacker's contract for the relayer's loss-budget tests: a bundle `[fee, taker.go()]` pays its
/// fee in every simulation and reverts whole when mined, taking the fee back. Two tells no simulation
/// can hide, since both change between the last simulation and the mined block: a time bomb (the mined
/// block's timestamp) and a switch its owner flips in the same block, ahead of the relayer's transaction.
contract TestFeeTaker {
    bool public armed;
    uint256 public burned;

    function arm(bool on) external {
        armed = on;
    }

    /// Passes unless armed or `notBefore` has come; then burns gas and reverts the whole bundle (invalid()).
    function go(uint256 notBefore) external {
        if (armed || block.timestamp >= notBefore) {
            while (gasleft() > 40_000) burned += 1;
            assembly {
                invalid()
            }
        }
    }

    /// Passes unless armed or `notBefore` has come; then reverts with `size` bytes of revert data, which a
    /// wallet copies into memory and logs in TxFailed when the call has revertOnError=false.
    function bomb(uint256 notBefore, uint256 size) external view {
        if (armed || block.timestamp >= notBefore) {
            assembly {
                revert(0, size)
            }
        }
    }
}
