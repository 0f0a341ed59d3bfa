// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice An ERC20 of the MKR/SAI generation: name() and symbol() return bytes32, not string.
contract TestBytes32Token {
    bytes32 public name;
    bytes32 public symbol;
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor(bytes32 name_, bytes32 symbol_, uint256 supply) {
        name = name_;
        symbol = symbol_;
        totalSupply = supply;
        balanceOf[msg.sender] = supply;
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        balanceOf[msg.sender] -= amount;
        balanceOf[to] += amount;
        emit Transfer(msg.sender, to, amount);
        return true;
    }
}
