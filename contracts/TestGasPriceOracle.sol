// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

/// @notice The OP stack's GasPriceOracle as the relayer reads it (predeploy 0x4200…000F), for tests on
/// anvil: placed there with anvil_setCode, an L1 data fee of `perByte` wei per byte of the transaction, and
/// an upper bound on the shape of Fjord's (the unsigned size plus the signature's 68 bytes, plus the
/// compression bound's slack). `perByte` is settable by anyone: it stands for the L1 price moving.
contract TestGasPriceOracle {
    uint256 public perByte;

    function setPerByte(uint256 wei_) external {
        perByte = wei_;
    }

    function getL1Fee(bytes calldata data) external view returns (uint256) {
        return (data.length + 68) * perByte;
    }

    function getL1FeeUpperBound(uint256 unsignedTxSize) external view returns (uint256) {
        uint256 size = unsignedTxSize + 68;
        return (size + size / 255 + 16) * perByte;
    }
}
