// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice Test fixture: an ERC-1155 look-alike whose uri(id) is a single settable string for all ids,
/// so tests control the exact template (with or without `{id}`). Anyone may set it.
contract TestURI1155 {
    string private _uri;

    function setURI(string calldata uri_) external {
        _uri = uri_;
    }

    function uri(uint256) external view returns (string memory) {
        return _uri;
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x01ffc9a7 // ERC-165
            || interfaceId == 0xd9b67a26 // ERC-1155
            || interfaceId == 0x0e89341c; // ERC-1155 Metadata URI
    }
}
