// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice ERC-7572 contract-level metadata (OpenZeppelin 5 ships no interface for it).
interface IERC7572 {
    event ContractURIUpdated();

    function contractURI() external view returns (string memory);
}
