import { concat, stringToHex, type Address, type Hex } from 'viem';

/**
 * The nonce space whose read returns a wallet's implementation slot instead (a probe-aware proxy, below).
 * ≥ 2^248, while a bundle's nonce space is < 2^160 (its nonce's top 160 bits): no real read matches it.
 */
export const SLOT_MAGIC: Hex = stringToHex('metarelay:implementation-slot', { size: 32 });
export const SLOT_MAGIC_SPACE = BigInt(SLOT_MAGIC);

/**
 * The wallet proxy's runtime code (WALLET_PROXY_CODE, wallets.ts) with one entry in front, placed on a
 * known wallet proxy by state override in a simulation so the same eth_call also reads the wallet's
 * implementation slot: a call from `probe` with exactly 36 bytes whose word at 4 is SLOT_MAGIC (the
 * probe's readNonce(SLOT_MAGIC) in peek) returns sload(address()); every other call, from any caller,
 * runs the original proxy unchanged (delegatecall to sload(address()), returndata and revert forwarded).
 *
 * Not invisible: each call into the wallet costs 47 gas more (measured gas and the trial run are that
 * much conservative), and EXTCODESIZE/EXTCODEHASH of the wallet differ in this simulation. The
 * dispatcher simulates again before signing without it (ChainRelayer.simulate, no slot reads).
 */
export function probeAwareProxyCode(probe: Address): Hex {
  // prettier-ignore
  return concat([
    '0x33', // 00 CALLER
    '0x73',
    probe, // 01 PUSH20 probe
    '0x14', // 22 EQ                       caller == probe
    '0x36', // 23 CALLDATASIZE
    '0x6024', // 24 PUSH1 36
    '0x14', // 26 EQ                       calldatasize == 36
    '0x16', // 27 AND
    '0x6004', // 28 PUSH1 4
    '0x35', // 30 CALLDATALOAD             the word after the selector
    '0x7f',
    SLOT_MAGIC, // 31 PUSH32 SLOT_MAGIC
    '0x14', // 64 EQ
    '0x16', // 65 AND
    '0x605f', // 66 PUSH1 0x5f               the slot read below
    '0x57', // 68 JUMPI                    stack empty again either way
    // WALLET_PROXY_CODE from here (offset 0x45), its one jump target moved from 0x18 to 0x45 + 0x18 = 0x5d.
    '0x36', // 45 CALLDATASIZE
    '0x3d', // 46 RETURNDATASIZE           0 (no call made yet)
    '0x3d', // 47 RETURNDATASIZE           0
    '0x37', // 48 CALLDATACOPY             calldata to memory 0
    '0x3d', // 49 RETURNDATASIZE           0, kept for RETURN/REVERT's offset
    '0x3d', // 4a RETURNDATASIZE           retSize 0
    '0x3d', // 4b RETURNDATASIZE           retOffset 0
    '0x36', // 4c CALLDATASIZE             argsSize
    '0x3d', // 4d RETURNDATASIZE           argsOffset 0
    '0x30', // 4e ADDRESS
    '0x54', // 4f SLOAD                    implementation = sload(address())
    '0x5a', // 50 GAS
    '0xf4', // 51 DELEGATECALL
    '0x3d', // 52 RETURNDATASIZE
    '0x82', // 53 DUP3                     offset 0 (the kept 0)
    '0x80', // 54 DUP1                     destOffset 0
    '0x3e', // 55 RETURNDATACOPY           returndata to memory 0
    '0x90', // 56 SWAP1
    '0x3d', // 57 RETURNDATASIZE
    '0x91', // 58 SWAP2
    '0x605d', // 59 PUSH1 0x5d               (0x18 in the original)
    '0x57', // 5b JUMPI                    success: return
    '0xfd', // 5c REVERT                   failure: revert with the returndata
    '0x5b', // 5d JUMPDEST
    '0xf3', // 5e RETURN
    // The probe's slot read.
    '0x5b', // 5f JUMPDEST
    '0x30', // 60 ADDRESS
    '0x54', // 61 SLOAD                    the implementation slot
    '0x6000', // 62 PUSH1 0
    '0x52', // 64 MSTORE
    '0x6020', // 65 PUSH1 32
    '0x6000', // 67 PUSH1 0
    '0xf3', // 69 RETURN                   32 bytes
  ]);
}
