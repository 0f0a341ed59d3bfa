// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @notice An ERC20 whose name() reverts; symbol(), decimals(), totalSupply() and balanceOf() work.
contract TestNamelessToken is ERC20 {
    constructor(string memory symbol_, uint256 supply) ERC20("", symbol_) {
        _mint(msg.sender, supply);
    }

    function name() public pure override returns (string memory) {
        revert("name: not available");
    }
}
