// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

interface IDevMintable {
    function mint(address to, uint256 amount) external;
}

interface IDevUniswapV3Pool {
    function token0() external view returns (address);
    function token1() external view returns (address);
    function mint(address recipient, int24 tickLower, int24 tickUpper, uint128 amount, bytes calldata data) external returns (uint256, uint256);
    function swap(address recipient, bool zeroForOne, int256 amountSpecified, uint160 sqrtPriceLimitX96, bytes calldata data) external returns (int256, int256);
}

/// @notice Dev-chain wrapped native token: 18 decimals, open faucet (it backs Uniswap v3 dev pools, nothing else).
contract DevWrappedNative is ERC20 {
    constructor() ERC20("Dev Wrapped Ether", "DWETH") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }
}

/// @notice Adds liquidity to and swaps in a Uniswap v3 pool of two open-faucet dev tokens: the pool's
/// callbacks are paid by minting, so the dev chain and tests need no token balances to move a price.
contract DevUniswapV3Helper {
    function mint(address pool, int24 tickLower, int24 tickUpper, uint128 liquidity) external {
        IDevUniswapV3Pool(pool).mint(address(this), tickLower, tickUpper, liquidity, "");
    }

    function swap(address pool, bool zeroForOne, int256 amountSpecified, uint160 sqrtPriceLimitX96) external {
        IDevUniswapV3Pool(pool).swap(address(this), zeroForOne, amountSpecified, sqrtPriceLimitX96, "");
    }

    function uniswapV3MintCallback(uint256 amount0, uint256 amount1, bytes calldata) external {
        _pay(amount0, amount1);
    }

    function uniswapV3SwapCallback(int256 amount0, int256 amount1, bytes calldata) external {
        _pay(amount0 > 0 ? uint256(amount0) : 0, amount1 > 0 ? uint256(amount1) : 0);
    }

    function _pay(uint256 amount0, uint256 amount1) private {
        if (amount0 > 0) IDevMintable(IDevUniswapV3Pool(msg.sender).token0()).mint(msg.sender, amount0);
        if (amount1 > 0) IDevMintable(IDevUniswapV3Pool(msg.sender).token1()).mint(msg.sender, amount1);
    }
}
