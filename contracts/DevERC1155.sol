// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

/// @notice Dev-chain multi-token with an ERC-1155 `{id}` template URI.
contract DevERC1155 is ERC1155, Ownable {
    uint256[] private _knownIds;
    mapping(uint256 => bool) private _known;

    constructor(string memory uri_) ERC1155(uri_) Ownable(msg.sender) {}

    function mint(address to, uint256 id, uint256 amount) external onlyOwner {
        if (!_known[id]) {
            _known[id] = true;
            _knownIds.push(id);
        }
        _mint(to, id, amount, "");
    }

    /// @notice ERC-1155 wants a URI event whenever a token's URI changes; a new template changes
    /// every minted id, so each gets one (bounded: this is a dev contract with a handful of ids).
    function setURI(string calldata uri_) external onlyOwner {
        _setURI(uri_);
        for (uint256 i = 0; i < _knownIds.length; i++) {
            emit URI(uri_, _knownIds[i]);
        }
    }
}
