// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC721Enumerable} from "@openzeppelin/contracts/token/ERC721/extensions/ERC721Enumerable.sol";

/// @notice Test fixture: an ERC721Enumerable (tokenURI = base + decimal id), so a refreshAll can list
/// its tokens with totalSupply/tokenByIndex instead of mint logs. Anyone may mint and burn.
contract TestEnumerableERC721 is ERC721Enumerable {
    string private _base;

    constructor(string memory baseURI_) ERC721("Enumerable Test", "ENUM") {
        _base = baseURI_;
    }

    function mint(address to, uint256 id) external {
        _mint(to, id);
    }

    function burn(uint256 id) external {
        _burn(id);
    }

    function _baseURI() internal view override returns (string memory) {
        return _base;
    }
}
