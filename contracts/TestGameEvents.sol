// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// A game's own event, for the indexer streams' tests: no token moves, so only a read of every log of a
// block (not the indexer's transfer reads) sees it.
contract TestGameEvents {
    event Scored(address indexed player, uint256 indexed round, uint256 points);

    function score(address player, uint256 round, uint256 points) external {
        emit Scored(player, round, points);
    }
}
