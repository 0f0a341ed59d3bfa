// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @notice Dev-chain fungible token. Six decimals (like USDC) so clients that assume 18 are caught early.
contract DevERC20 is ERC20 {
    constructor(string memory name_, string memory symbol_) ERC20(name_, symbol_) {}

    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Open faucet: any account may mint, so tests never need the deployer key.
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}
