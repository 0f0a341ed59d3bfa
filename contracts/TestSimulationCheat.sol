// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice An attacker's contract for the relayer's abuse tests. It is not a Sequence wallet, yet it has
/// the wallet's `execute` selector; it tells a simulation (eth_call) from a mined transaction, pays the
/// relayer only in the first, and burns gas in the second.
contract TestSimulationCheat {
    struct Transaction {
        bool delegateCall;
        bool revertOnError;
        uint256 gasLimit;
        address target;
        uint256 value;
        bytes data;
    }

    uint256 public burned;
    /// The block `arm` was called in: a run on its state (a simulation at "latest") is taken for a simulation.
    uint256 public armedAt;

    /// The attacker's switch between intake and mining: state changed in between is a tell no simulation
    /// can hide (docs/relayer-worst-case.md). Called in the block before the bundle is sent.
    function arm() external {
        armedAt = block.number;
    }

    /// Same selector as a Sequence wallet's execute: a selector-based decoder takes it for a wallet.
    function execute(Transaction[] calldata, uint256, bytes calldata) external {
        _burn(200);
    }

    /// Gas price 0 and a sender funded by state override were the relayer's old tells; it now simulates like
    /// the mined run, so this one keys on state set between intake and mining (a run on the block `arm` was
    /// mined in). A simulation is evidence, never a guarantee.
    function simulated() public view returns (bool) {
        return tx.gasprice == 0 || (armedAt != 0 && block.number <= armedAt);
    }

    /// Pays `amount` of its own `token` to `payee` when simulated; burns gas for real.
    function payIfSimulated(address token, address payee, uint256 amount) external {
        if (simulated()) IERC20(token).transfer(payee, amount);
        else _burn(200);
    }

    /// Takes the caller's whole balance of `token` (it approved this contract) when not simulated.
    function drainIfReal(address token) external {
        if (simulated()) return;
        IERC20(token).transferFrom(msg.sender, address(this), IERC20(token).balanceOf(msg.sender));
    }

    function _burn(uint256 n) private {
        for (uint256 i = 0; i < n; i++) burned += i;
    }
}
