// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice Attackers' contracts for the relayer's "simulate like the real run" tests: each tells a
/// simulation from the mined run by one thing the relayer used to choose for its simulations, returns
/// cheaply when it believes it is simulated and fails (burning its gas) when it believes it is mined. A
/// bundle [fee transfer, tell.go()] then paid in every simulation and reverted whole, fee and all, on chain.

/// Believes it is simulated when the gas price is at least twice the base fee: the relayer simulated at
/// 2 × eth_gasPrice, while a mined EIP-1559 transaction pays the base fee plus a tip.
contract TestGasPriceTell {
    uint256 public burned;

    function simulated() public view returns (bool) {
        return tx.gasprice >= 2 * block.basefee;
    }

    function go() external {
        if (simulated()) return;
        _burnAll();
    }

    function _burnAll() internal {
        while (gasleft() > 5_000) burned += 1;
        revert("mined");
    }
}

/// Believes it is simulated when the transaction's origin holds at least 10^23 wei: the relayer gave its
/// simulated sender 10^24 wei by state override, far more than any sender holds.
contract TestBalanceTell {
    uint256 public burned;

    function simulated() public view returns (bool) {
        return tx.origin.balance >= 1e23;
    }

    function go() external {
        if (simulated()) return;
        while (gasleft() > 5_000) burned += 1;
        revert("mined");
    }
}
