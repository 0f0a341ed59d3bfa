// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.20;

import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// A wallet implementation an EOA delegates to with EIP-7702 (its code becomes 0xef0100 ‖ this address).
/// It speaks the Sequence v2 wallet's call ABI (execute, selfExecute, readNonce, the TxExecuted /
/// TxFailed / NonceChange events and errors), so metarelay's bundle codec, fee detection, probe and
/// receipts treat a delegated EOA like any v2 wallet. What differs is authentication: a bundle is signed
/// by the EOA's own key (65-byte ECDSA over the v2 subdigest of the bundle, bound to the chain id, the
/// EOA's address, the nonce with its space and the transactions), and nonces live in an ERC-7201
/// namespace, because a delegated EOA's storage is shared with whatever code it delegated to before.
/// Delegatecall transactions are refused: a delegatecall runs foreign code on the EOA's storage and
/// balance, which a signature over its address cannot make safe.
contract DelegatedWallet {
    struct Transaction {
        bool delegateCall;
        bool revertOnError;
        uint256 gasLimit;
        address target;
        uint256 value;
        bytes data;
    }

    event TxExecuted(bytes32 indexed _tx, uint256 _index);
    event TxFailed(bytes32 indexed _tx, uint256 _index, bytes _reason);
    event NonceChange(uint256 _space, uint256 _newNonce);

    error BadNonce(uint256 _space, uint256 _provided, uint256 _current);
    error InvalidSignature(bytes32 _hash, bytes _signature);
    error NotEnoughGas(uint256 _index, uint256 _requested, uint256 _available);
    error OnlySelfAuth(address _sender, address _self);
    error DelegateCallRefused(uint256 _index);

    /// @custom:storage-location erc7201:metarelay.storage.DelegatedWallet
    struct Nonces {
        mapping(uint256 => uint256) bySpace;
    }

    // keccak256(abi.encode(uint256(keccak256("metarelay.storage.DelegatedWallet")) - 1)) & ~bytes32(uint256(0xff))
    bytes32 private constant NONCES_LOCATION = 0x3d41b98ac73051b8c6ff26b036b63934b115ab8e3f428764da3e4a967e551900;

    uint256 private constant NONCE_BITS = 96;
    bytes4 private constant ERC1271_MAGIC = 0x1626ba7e;

    function _nonces() private pure returns (Nonces storage $) {
        assembly {
            $.slot := NONCES_LOCATION
        }
    }

    /// The v2 subdigest: what the EOA signs for a bundle, and the `_tx` of its events.
    function _subdigest(bytes32 _digest) private view returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", block.chainid, address(this), _digest));
    }

    function readNonce(uint256 _space) public view returns (uint256) {
        return _nonces().bySpace[_space];
    }

    function nonce() external view returns (uint256) {
        return readNonce(0);
    }

    function execute(Transaction[] calldata _txs, uint256 _nonce, bytes calldata _signature) external {
        uint256 space = _nonce >> NONCE_BITS;
        uint256 provided = _nonce & type(uint96).max;
        uint256 current = _nonces().bySpace[space];
        if (current != provided) revert BadNonce(space, provided, current);
        _nonces().bySpace[space] = provided + 1;
        emit NonceChange(space, provided + 1);

        bytes32 txHash = _subdigest(keccak256(abi.encode(_nonce, _txs)));
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(txHash, _signature);
        if (err != ECDSA.RecoverError.NoError || signer != address(this)) revert InvalidSignature(txHash, _signature);
        _execute(txHash, _txs);
    }

    /// Batches of the wallet's own making (a transaction of execute calling back into the wallet).
    function selfExecute(Transaction[] calldata _txs) external {
        if (msg.sender != address(this)) revert OnlySelfAuth(msg.sender, address(this));
        _execute(_subdigest(keccak256(abi.encode("self:", _txs))), _txs);
    }

    function _execute(bytes32 _txHash, Transaction[] calldata _txs) private {
        for (uint256 i = 0; i < _txs.length; i++) {
            Transaction calldata t = _txs[i];
            if (t.delegateCall) revert DelegateCallRefused(i);
            if (gasleft() < t.gasLimit) revert NotEnoughGas(i, t.gasLimit, gasleft());
            (bool ok, bytes memory ret) = t.target.call{value: t.value, gas: t.gasLimit == 0 ? gasleft() : t.gasLimit}(t.data);
            if (ok) {
                emit TxExecuted(_txHash, i);
            } else if (t.revertOnError) {
                assembly {
                    revert(add(ret, 32), mload(ret))
                }
            } else {
                emit TxFailed(_txHash, i, ret);
            }
        }
    }

    /// ERC-1271: a hash signed by the EOA's own key.
    function isValidSignature(bytes32 _hash, bytes calldata _signature) external view returns (bytes4) {
        (address signer, ECDSA.RecoverError err, ) = ECDSA.tryRecover(_hash, _signature);
        return err == ECDSA.RecoverError.NoError && signer == address(this) ? ERC1271_MAGIC : bytes4(0);
    }

    // An EOA keeps receiving what an EOA receives once it has code.
    receive() external payable {}

    function onERC721Received(address, address, uint256, bytes calldata) external pure returns (bytes4) {
        return this.onERC721Received.selector;
    }

    function onERC1155Received(address, address, uint256, uint256, bytes calldata) external pure returns (bytes4) {
        return this.onERC1155Received.selector;
    }

    function onERC1155BatchReceived(address, address, uint256[] calldata, uint256[] calldata, bytes calldata) external pure returns (bytes4) {
        return this.onERC1155BatchReceived.selector;
    }

    function supportsInterface(bytes4 _id) external pure returns (bool) {
        // ERC-165, ERC-721 receiver, ERC-1155 receiver
        return _id == 0x01ffc9a7 || _id == 0x150b7a02 || _id == 0x4e2312e0;
    }
}
