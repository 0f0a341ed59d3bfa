// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice A price feed (AggregatorV3Interface's read side) whose latest round is set whole, answeredInRound
/// included: Chainlink's MockV3Aggregator always answers answeredInRound == roundId, so the "round carried
/// over from an earlier one" case of a real aggregator cannot be shown with it. Tests put this code at a
/// feed's address (anvil_setCode): its round lives in a mapping entry, which no slot of MockV3Aggregator uses.
contract TestRoundFeed {
    struct Round {
        uint80 roundId;
        int256 answer;
        uint256 startedAt;
        uint256 updatedAt;
        uint80 answeredInRound;
    }

    mapping(uint256 => Round) private rounds;

    function set(uint80 roundId, int256 answer, uint256 updatedAt, uint80 answeredInRound) external {
        rounds[0] = Round(roundId, answer, updatedAt, updatedAt, answeredInRound);
    }

    function decimals() external pure returns (uint8) {
        return 8;
    }

    function latestRoundData() external view returns (uint80, int256, uint256, uint256, uint80) {
        Round memory r = rounds[0];
        return (r.roundId, r.answer, r.startedAt, r.updatedAt, r.answeredInRound);
    }
}
