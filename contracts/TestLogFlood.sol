// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// Tokens that emit many standard Transfer logs in one transaction, cheaply (one storage write per
// call, one log per token), so one block can hold more logs than a node answers in one eth_getLogs
// (issue 29). Their state agrees with their logs, so balanceOf is ground truth for the indexer.

/// @notice `flood(to, n)` mints n × 1 to `to`: n Transfer logs, balanceOf(to) grows by n.
contract TestFloodERC20 {
    event Transfer(address indexed from, address indexed to, uint256 value);

    mapping(address => uint256) public balanceOf;
    uint256 public totalSupply;

    function flood(address to, uint256 n) external {
        balanceOf[to] += n;
        totalSupply += n;
        for (uint256 i = 0; i < n; i++) emit Transfer(address(0), to, 1);
    }
}

/// @notice `floodMint(to, first, n)` mints ids first .. first+n-1 to `to`: one ERC721 Transfer log each.
contract TestFloodERC721 {
    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);

    function floodMint(address to, uint256 first, uint256 n) external {
        for (uint256 i = 0; i < n; i++) emit Transfer(address(0), to, first + i);
    }
}
