// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {IERC721} from "@openzeppelin/contracts/token/ERC721/IERC721.sol";
import {IERC721Metadata} from "@openzeppelin/contracts/token/ERC721/extensions/IERC721Metadata.sol";
import {IERC165} from "@openzeppelin/contracts/utils/introspection/IERC165.sol";

/// @notice An ERC721 implementation in the style of OpenZeppelin 2/3 ERC165Storage: its interfaces
/// are registered in storage by the constructor. Called directly it answers ERC165; behind a proxy
/// (delegatecall, the proxy's storage) the registrations are missing and every answer is false,
/// which is what a reader must see through by asking the implementation itself.
/// Name and symbol live in storage set by initialize(), so a proxy has its own.
contract TestLegacyERC721 is ERC721 {
    mapping(bytes4 => bool) private _supported;
    string private _tokenName;
    string private _tokenSymbol;

    constructor() ERC721("", "") {
        _supported[type(IERC165).interfaceId] = true;
        _supported[type(IERC721).interfaceId] = true;
        _supported[type(IERC721Metadata).interfaceId] = true;
    }

    function initialize(string calldata name_, string calldata symbol_) external {
        require(bytes(_tokenName).length == 0, "initialized");
        _tokenName = name_;
        _tokenSymbol = symbol_;
    }

    function name() public view override returns (string memory) {
        return _tokenName;
    }

    function symbol() public view override returns (string memory) {
        return _tokenSymbol;
    }

    function supportsInterface(bytes4 interfaceId) public view override returns (bool) {
        return _supported[interfaceId];
    }

    function mint(address to, uint256 id) external {
        _mint(to, id);
    }
}
