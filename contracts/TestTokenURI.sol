// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice Test fixture: an ERC-721 look-alike whose tokenURI is whatever a test stores, so any URI
/// form (ipfs://, ar://, data:, raw JSON, http://...) can be put on chain. Anyone may set URIs.
/// Ids that were never set revert, like a real ERC-721 does for nonexistent tokens.
contract TestTokenURI {
    error UnknownToken(uint256 id);

    /// @dev ERC-4906, so refresh handling can be tested with this fixture too.
    event MetadataUpdate(uint256 _tokenId);

    mapping(uint256 => string) private _uris;
    mapping(uint256 => bool) private _isSet;

    function name() external pure returns (string memory) {
        return "TestTokenURI";
    }

    function symbol() external pure returns (string memory) {
        return "TTU";
    }

    function setTokenURI(uint256 id, string calldata uri) external {
        _uris[id] = uri;
        _isSet[id] = true;
        emit MetadataUpdate(id);
    }

    function tokenURI(uint256 id) external view returns (string memory) {
        if (!_isSet[id]) revert UnknownToken(id);
        return _uris[id];
    }

    function supportsInterface(bytes4 interfaceId) external pure returns (bool) {
        return interfaceId == 0x01ffc9a7 // ERC-165
            || interfaceId == 0x80ac58cd // ERC-721
            || interfaceId == 0x5b5e139f; // ERC-721 Metadata
    }
}
