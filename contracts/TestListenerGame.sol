// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// A game's own event, not a token's, for the indexer's webhook listeners (issue 57): a listener may hear
// any event a contract emits. `spam` is issue 54's flood: many logs in one cheap transaction.

contract TestListenerGame {
    event Scored(address indexed player, uint256 points, string note);

    function score(address player, uint256 points, string calldata note) external {
        emit Scored(player, points, note);
    }

    /// @notice n Scored logs in one transaction.
    function spam(address player, uint256 n) external {
        for (uint256 i = 0; i < n; i++) emit Scored(player, i, "");
    }
}
