// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";

/// @notice An ERC721 (ERC165 says so) that also looks ERC20-ish: decimals() and totalSupply().
/// balanceOf(address) is ERC721's, so every ERC20 behaviour probe answers too.
contract TestHybridToken is ERC721 {
    uint256 public totalSupply;

    constructor(string memory name_, string memory symbol_) ERC721(name_, symbol_) {}

    function decimals() external pure returns (uint8) {
        return 0;
    }

    function mint(address to, uint256 id) external {
        totalSupply += 1;
        _mint(to, id);
    }
}
