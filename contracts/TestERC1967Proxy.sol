// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC1967Proxy} from "@openzeppelin/contracts/proxy/ERC1967/ERC1967Proxy.sol";

/// @notice OpenZeppelin's EIP-1967 proxy: the implementation address in the EIP-1967 slot, every
/// call delegated to it by the fallback; `data` runs once against the implementation (an initializer).
contract TestERC1967Proxy is ERC1967Proxy {
    constructor(address implementation, bytes memory data) ERC1967Proxy(implementation, data) {}
}
