import { concat, getAddress, hexToBigInt, isAddress, keccak256, parseSignature, type Address, type Hex, type SignedAuthorization } from 'viem';
import { recoverAuthorizationAddress } from 'viem/utils';
import { RelayError } from '../errors.ts';

/**
 * EIP-7702 on the wire (MetaTxn.authorization): the EOA `walletAddress` signs "my code is
 * 0xef0100 ‖ implementation" for one of its account nonces. The relayer carries it in a type-4
 * transaction the first time; afterwards the EOA's code is the designator and its bundles go as usual.
 */
export interface Authorization {
  chainId: number;
  implementation: Address;
  nonce: number;
  signature: Hex;
}

/** What the EVM charges per authorization in a type-4 transaction (PER_EMPTY_ACCOUNT_COST; part of it is refunded to a non-empty account). */
export const AUTHORIZATION_GAS = 25_000n;

/** The code a delegated EOA has: the EIP-7702 delegation designator. */
export function designator(implementation: Address): Hex {
  return concat(['0xef0100', implementation.toLowerCase() as Hex]);
}

/** What EXTCODEHASH (and the probe's codeHashes) returns for an EOA delegated to `implementation`. */
export function designatorHash(implementation: Address): Hex {
  return keccak256(designator(implementation));
}

/** The implementation an account's code delegates to, or null when the code is not a designator. */
export function delegatedTo(code: Hex | undefined): Address | null {
  return code && /^0xef0100[0-9a-f]{40}$/i.test(code) ? (`0x${code.slice(8)}`.toLowerCase() as Address) : null;
}

/** Structure only (no node call): the wire object, named field by field when something is wrong. */
export function parseAuthorization(field: string, value: unknown): Authorization | null {
  if (value === undefined || value === null) return null;
  const bad = (why: string) => new RelayError('invalidArgument', `${field}${why}`);
  if (typeof value !== 'object' || Array.isArray(value)) throw bad(': must be an object {chainId, implementation, nonce, signature}');
  const v = value as Record<string, unknown>;
  const uint = (k: string) => {
    const x = v[k];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0) throw bad(`.${k}: must be a non-negative integer`);
    return x;
  };
  const chainId = uint('chainId');
  const nonce = uint('nonce');
  if (typeof v.implementation !== 'string' || !isAddress(v.implementation, { strict: false })) throw bad('.implementation: must be an address');
  if (typeof v.signature !== 'string' || !/^0x[0-9a-fA-F]{130}$/.test(v.signature)) throw bad('.signature: must be a 65-byte hex signature (r ‖ s ‖ v)');
  return { chainId, implementation: v.implementation.toLowerCase() as Address, nonce, signature: v.signature.toLowerCase() as Hex };
}

const SECP256K1_HALF_N = 0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n;

/** The form viem signs into a type-4 transaction's authorizationList. */
export function signedAuthorization(a: Authorization): SignedAuthorization {
  const sig = parseSignature(a.signature);
  return { address: getAddress(a.implementation), chainId: a.chainId, nonce: a.nonce, r: sig.r, s: sig.s, yParity: sig.yParity ?? (sig.v === 28n ? 1 : 0) };
}

/**
 * Everything but the account nonce: this chain (or 0, any chain), an implementation this relayer
 * accepts, and a signature of `wallet` itself. A signature of any other key would, on chain, delegate
 * that key's account instead (or nothing), and the relayer would pay for a call that runs no wallet.
 */
export async function checkAuthorization(a: Authorization, ctx: { field: string; chainId: number; wallet: Address; accepted: readonly Address[] }): Promise<void> {
  const f = ctx.field;
  if (a.chainId !== 0 && a.chainId !== ctx.chainId) throw new RelayError('invalidArgument', `${f}.chainId: ${a.chainId} is not this network's chain id (${ctx.chainId}) nor 0`);
  if (!ctx.accepted.some((x) => x.toLowerCase() === a.implementation)) {
    const list = ctx.accepted.length ? ctx.accepted.map((x) => getAddress(x)).join(', ') : 'none is configured';
    throw new RelayError('invalidArgument', `${f}.implementation: ${getAddress(a.implementation)} is not a wallet implementation this relayer accepts for delegated EOAs (accepted: ${list})`);
  }
  // EIP-7702 skips an authorization whose s is in the upper half of the curve order (EIP-2 malleability).
  if (hexToBigInt(`0x${a.signature.slice(66, 130)}`) > SECP256K1_HALF_N) throw new RelayError('invalidArgument', `${f}.signature: s is in the upper half of the curve order, which EIP-7702 refuses`);
  let signer: Address;
  try {
    signer = await recoverAuthorizationAddress({ authorization: { address: getAddress(a.implementation), chainId: a.chainId, nonce: a.nonce }, signature: a.signature });
  } catch {
    throw new RelayError('invalidArgument', `${f}.signature: not a valid ECDSA signature`);
  }
  if (signer.toLowerCase() !== ctx.wallet.toLowerCase()) {
    throw new RelayError('invalidArgument', `${f}.signature: signed by ${signer}, not by the wallet ${getAddress(ctx.wallet)} it would delegate`);
  }
}
