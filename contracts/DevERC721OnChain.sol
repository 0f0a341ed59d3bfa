// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {Base64} from "@openzeppelin/contracts/utils/Base64.sol";
import {Strings} from "@openzeppelin/contracts/utils/Strings.sol";

/// @notice Dev-chain NFT with fully on-chain metadata: tokenURI is a base64 JSON data URI whose
/// image is itself a base64 SVG data URI, so the metadata pipeline is tested without any origin.
contract DevERC721OnChain is ERC721, Ownable {
    using Strings for uint256;

    constructor() ERC721("Dev OnChain", "DEVOC") Ownable(msg.sender) {}

    function mint(address to, uint256 id) external onlyOwner {
        _mint(to, id);
    }

    function tokenURI(uint256 id) public view override returns (string memory) {
        _requireOwned(id);
        uint256 hue = (id * 47) % 360;
        string memory json = string.concat(
            '{"name":"OnChain #',
            id.toString(),
            '","description":"A fully on-chain metarelay dev token.","image":"data:image/svg+xml;base64,',
            Base64.encode(bytes(_svg(id, hue))),
            '","attributes":[{"trait_type":"Hue","value":',
            hue.toString(),
            '},{"trait_type":"Parity","value":"',
            id % 2 == 0 ? "even" : "odd",
            '"}]}'
        );
        return string.concat("data:application/json;base64,", Base64.encode(bytes(json)));
    }

    function _svg(uint256 id, uint256 hue) private pure returns (string memory) {
        return string.concat(
            '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><rect width="100" height="100" fill="hsl(',
            hue.toString(),
            ',70%,45%)"/><text x="50" y="57" font-size="20" font-family="monospace" text-anchor="middle" fill="#fff">#',
            id.toString(),
            "</text></svg>"
        );
    }
}
