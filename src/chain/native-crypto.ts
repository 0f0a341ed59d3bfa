import { createRequire } from 'node:module';
import { keccak256 as jsKeccak256, type Hex } from 'viem';

/*
 * keccak-256 and secp256k1 signing in native code, where the npm packages' prebuilt add-ons load (Linux,
 * macOS and Windows on x64, no compiler needed); viem's pure-JS ones (@noble) otherwise, with the same
 * results. They are what the relayer does most: a dispatched transaction is hashed twice and signed once
 * (1.1 ms of one `serve`'s 3 ms per meta-transaction in @noble, 30 Nov), an intake hashes its bundle's
 * calls. Native: 17 µs against 151 µs for a 1.5 kB keccak, 94 µs against 815 µs a signature on this VM.
 * Signatures are RFC 6979 and low-s in both, so byte for byte the same (test/native-crypto.test.ts).
 */

interface KeccakHash {
  update(data: Buffer): KeccakHash;
  digest(): Buffer;
}
interface Secp256k1 {
  ecdsaSign(msg32: Uint8Array, seckey: Uint8Array): { signature: Uint8Array; recid: number };
}

const require = createRequire(import.meta.url);

/** The add-ons themselves, not the packages' entry points: those fall back to slower JS than viem's. */
function load<T>(id: string): T | undefined {
  try {
    return require(id) as T;
  } catch {
    return undefined;
  }
}

const keccakFactory = load<(algorithm: string) => KeccakHash>('keccak/bindings');
const secp = load<Secp256k1>('secp256k1/bindings');

/** Whether the native add-ons are in use (else viem's JS), for the boot log and the tests. */
export const nativeCrypto = { keccak: keccakFactory !== undefined, secp256k1: secp !== undefined };

const bytesOf = (hex: Hex): Buffer => Buffer.from(hex.length % 2 ? `0${hex.slice(2)}` : hex.slice(2), 'hex');

/** keccak-256 of hex data, as viem's keccak256(hex). */
export function keccak256(data: Hex): Hex {
  if (!keccakFactory) return jsKeccak256(data);
  return `0x${keccakFactory('keccak256').update(bytesOf(data)).digest().toString('hex')}`;
}

/** A signature as viem's sign() returns it (r, s, v = 27 + yParity, yParity), for its serializers. */
export interface RecoverableSignature {
  r: Hex;
  s: Hex;
  v: bigint;
  yParity: number;
}

/**
 * Signs a 32-byte hash with a private key (both hex); undefined without the native add-on, for the
 * caller to use viem's account instead.
 */
export function signHash(hash: Hex, privateKey: Hex): RecoverableSignature | undefined {
  if (!secp) return undefined;
  const { signature, recid } = secp.ecdsaSign(bytesOf(hash), bytesOf(privateKey));
  const hex = Buffer.from(signature).toString('hex');
  return { r: `0x${hex.slice(0, 64)}`, s: `0x${hex.slice(64)}`, v: BigInt(27 + recid), yParity: recid };
}
