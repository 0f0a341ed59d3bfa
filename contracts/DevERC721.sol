// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {IERC4906} from "@openzeppelin/contracts/interfaces/IERC4906.sol";
import {IERC165} from "@openzeppelin/contracts/utils/introspection/IERC165.sol";
import {IERC7572} from "./IERC7572.sol";

/// @notice Dev-chain NFT whose metadata lives on an HTTP origin: tokenURI = baseURI + decimal id.
/// Emits the ERC-4906 and ERC-7572 signals so metadata refresh paths can be exercised.
contract DevERC721 is ERC721, Ownable, IERC4906, IERC7572 {
    string private _base;
    string private _contractURI;

    constructor(string memory name_, string memory symbol_, string memory baseURI_, string memory contractURI_)
        ERC721(name_, symbol_)
        Ownable(msg.sender)
    {
        _base = baseURI_;
        _contractURI = contractURI_;
    }

    function mint(address to, uint256 id) external onlyOwner {
        _mint(to, id);
    }

    function setBaseURI(string calldata baseURI_) external onlyOwner {
        _base = baseURI_;
        // Every token's URI moves with the base, so announce the whole id space.
        emit BatchMetadataUpdate(0, type(uint256).max);
    }

    /// @notice Lets tests trigger a single-token refresh without changing anything on chain.
    function emitMetadataUpdate(uint256 id) external onlyOwner {
        emit MetadataUpdate(id);
    }

    function contractURI() external view returns (string memory) {
        return _contractURI;
    }

    function setContractURI(string calldata contractURI_) external onlyOwner {
        _contractURI = contractURI_;
        emit ContractURIUpdated();
    }

    function supportsInterface(bytes4 interfaceId) public view override(ERC721, IERC165) returns (bool) {
        return interfaceId == bytes4(0x49064906) || super.supportsInterface(interfaceId);
    }

    function _baseURI() internal view override returns (string memory) {
        return _base;
    }
}
