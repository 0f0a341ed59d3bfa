import { createKeccak } from 'hash-wasm';
import { signRecoverable } from 'tiny-secp256k1';
import type { Hex } from 'viem';

/*
 * keccak-256 and secp256k1 signing in WebAssembly (hash-wasm; tiny-secp256k1, libsecp256k1 compiled to
 * WASM): no native add-on and no install script, so they run on every platform and an operator's
 * install stays quiet. They are what the relayer does most: a dispatched transaction is hashed twice and
 * signed once (1.1 ms of one `serve`'s 3 ms per meta-transaction in viem's pure-JS @noble, 30 Nov), an
 * intake hashes its bundle's calls. On this VM: 15 µs against 151 µs a 1.5 kB hash, 250 µs against
 * 815 µs a signature. Both RFC 6979 and low-s, so byte for byte what viem gives (test/evm-crypto.test.ts).
 */

/** One hasher, reused: every call below runs to its end synchronously, so none interleaves. */
const keccak = await createKeccak(256);

const bytesOf = (hex: Hex): Buffer => Buffer.from(hex.length % 2 ? `0${hex.slice(2)}` : hex.slice(2), 'hex');

/** keccak-256 of hex data, as viem's keccak256(hex). */
export function keccak256(data: Hex): Hex {
  keccak.init();
  keccak.update(bytesOf(data));
  return `0x${keccak.digest('hex')}`;
}

/** A signature as viem's sign() returns it (r, s, v = 27 + yParity, yParity), for its serializers. */
export interface RecoverableSignature {
  r: Hex;
  s: Hex;
  v: bigint;
  yParity: number;
}

/** Signs a 32-byte hash with a private key (both hex). */
export function signHash(hash: Hex, privateKey: Hex): RecoverableSignature {
  const { signature, recoveryId } = signRecoverable(bytesOf(hash), bytesOf(privateKey));
  const hex = Buffer.from(signature).toString('hex');
  return { r: `0x${hex.slice(0, 64)}`, s: `0x${hex.slice(64)}`, v: BigInt(27 + recoveryId), yParity: recoveryId };
}
