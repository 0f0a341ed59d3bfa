// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice An attacker's contract for the relayer's worst-case tests: cheap when the relayer looks, dear
/// when it pays. Either it tells a simulation from the mined run (gas price 0), or its owner switches it
/// (`arm`) between intake and dispatch. What it can burn is bounded only by the gas limit signed.
contract TestGasGriefer {
    bool public armed;
    uint256 public burned;

    function arm(bool on) external {
        armed = on;
    }

    /// Needs `need` gas to pass, so a trial at the gas a simulation used fails and eth_estimateGas sizes a
    /// large limit; cheap when simulated at gas price 0, burns all but `reserve` when mined.
    function go(uint256 need, uint256 reserve) external {
        require(gasleft() >= need, "not enough gas");
        if (tx.gasprice == 0) return;
        _burn(reserve);
    }

    /// Needs `need` gas to pass; burns all but `reserve` once armed (whatever the gas price).
    function goArmed(uint256 need, uint256 reserve) external {
        require(gasleft() >= need, "not enough gas");
        if (armed) _burn(reserve);
    }

    /// Cheap until armed; armed, it needs `need` gas (more than it was sized for) and burns all but `reserve`.
    function heavyWhenArmed(uint256 need, uint256 reserve) external {
        if (!armed) return;
        require(gasleft() >= need, "not enough gas");
        _burn(reserve);
    }

    function _burn(uint256 reserve) private {
        while (gasleft() > reserve) burned += 1;
    }
}
