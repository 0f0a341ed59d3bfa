// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {ERC721} from "@openzeppelin/contracts/token/ERC721/ERC721.sol";
import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";

// Tokens for the indexer tests. Every movement is open to anyone (`move`), so one funded test
// account can play every holder; the events are the standard ones OpenZeppelin emits.

contract TestIndexERC20 is ERC20 {
    constructor() ERC20("Index Twenty", "IX20") {}

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function burn(address from, uint256 amount) external {
        _burn(from, amount);
    }

    function move(address from, address to, uint256 amount) external {
        _transfer(from, to, amount);
    }
}

/// @notice Takes a 10% fee on every transfer between holders, sent to `collector` as a second Transfer.
contract TestFeeToken is ERC20 {
    address public immutable collector;

    constructor(address collector_) ERC20("Fee Token", "FEE") {
        collector = collector_;
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    function move(address from, address to, uint256 amount) external {
        _transfer(from, to, amount);
    }

    function _update(address from, address to, uint256 value) internal override {
        if (from == address(0) || to == address(0) || from == collector) {
            super._update(from, to, value);
            return;
        }
        uint256 fee = value / 10;
        super._update(from, collector, fee);
        super._update(from, to, value - fee);
    }
}

contract TestIndexERC721 is ERC721 {
    constructor() ERC721("Index NFT", "IX721") {}

    function mint(address to, uint256 id) external {
        _mint(to, id);
    }

    function burn(uint256 id) external {
        _burn(id);
    }

    function move(address from, address to, uint256 id) external {
        _transfer(from, to, id);
    }
}

contract TestIndexERC1155 is ERC1155 {
    constructor(string memory uri_) ERC1155(uri_) {}

    function mint(address to, uint256 id, uint256 amount) external {
        _mint(to, id, amount, "");
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata amounts) external {
        _mintBatch(to, ids, amounts, "");
    }

    function burnBatch(address from, uint256[] calldata ids, uint256[] calldata amounts) external {
        _burnBatch(from, ids, amounts);
    }

    function move(address from, address to, uint256 id, uint256 amount) external {
        _safeTransferFrom(from, to, id, amount, "");
    }

    function moveBatch(address from, address to, uint256[] calldata ids, uint256[] calldata amounts) external {
        _safeBatchTransferFrom(from, to, ids, amounts, "");
    }
}

/// @notice Emits transfer events that break their standard's shape; an indexer must skip them.
contract TestMalformedTransfers {
    bytes32 constant TRANSFER = keccak256("Transfer(address,address,uint256)");
    bytes32 constant SINGLE = keccak256("TransferSingle(address,address,address,uint256,uint256)");
    bytes32 constant BATCH = keccak256("TransferBatch(address,address,address,uint256[],uint256[])");

    function emitMalformed(address to) external {
        bytes32 t = TRANSFER;
        bytes32 s = SINGLE;
        bytes32 b = BATCH;
        assembly {
            let p := mload(0x40)
            mstore(p, 1000)
            // Transfer with two topics (from only), amount in data.
            log2(p, 32, t, 0)
            // Transfer with three topics but no amount.
            log3(p, 0, t, 0, to)
            // Transfer with five... not possible; four topics plus a data word.
            log4(p, 32, t, 0, to, 7)
            // TransferSingle with one word of data instead of two.
            log4(p, 32, s, caller(), 0, to)
            // TransferBatch whose array offset points past the data.
            mstore(p, 0x1000)
            mstore(add(p, 32), 0x1000)
            log4(p, 64, b, caller(), 0, to)
            // Transfer with an address topic that has high bits set.
            mstore(p, 5)
            log3(p, 32, t, not(0), to)
        }
    }
}

/// @notice For the indexer bench: `n` ERC20 Transfer events among `accounts` pseudo-random holders,
/// without the storage writes of real transfers (the indexer reads logs, not state).
contract TestTransferSpray {
    bytes32 constant TRANSFER = keccak256("Transfer(address,address,uint256)");

    function spray(uint256 n, uint256 accounts, uint256 seed) external {
        bytes32 t = TRANSFER;
        for (uint256 i = 0; i < n; i++) {
            uint256 r = uint256(keccak256(abi.encode(seed, i)));
            address from = address(uint160((r % accounts) + 1));
            address to = address(uint160(((r >> 64) % accounts) + 1));
            uint256 amount = (r >> 128) % 1000;
            assembly {
                mstore(0, amount)
                log3(0, 32, t, from, to)
            }
        }
    }
}
