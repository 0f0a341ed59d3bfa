// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {MockV3Aggregator} from "@chainlink/contracts/src/v0.8/tests/MockV3Aggregator.sol";

/// @notice Chainlink's own MockV3Aggregator (AggregatorV3Interface; updateAnswer, updateRoundData), under a
/// name of ours so the dev chain and tests deploy it from this repository's artifacts.
contract DevAggregator is MockV3Aggregator {
    constructor(uint8 decimals_, int256 initialAnswer) MockV3Aggregator(decimals_, initialAnswer) {}
}
