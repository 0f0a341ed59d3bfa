import { concat, getAddress, hexToBigInt, isAddress, keccak256, parseSignature, type Address, type Hex, type PublicClient, type SignedAuthorization } from 'viem';
import { recoverAuthorizationAddress } from 'viem/utils';
import { RelayError } from '../errors.ts';
import { askAgainWhileBehind } from './ask-again.ts';

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

/**
 * The account nonce of `wallet` at `block`, one a simulation that placed its delegation by override ran
 * on: the authorization held there only if it is the nonce signed. A node without that block refuses it
 * (asked again: another may have it, ask-again.ts); null when none answered.
 */
export async function readNonceAt(client: PublicClient, wallet: Address, block: bigint): Promise<number | null> {
  return (await askAgainWhileBehind(() => client.getTransactionCount({ address: wallet, blockNumber: block }))) ?? null;
}

export interface AccountState {
  /** The EOA's code is the designator of the authorization's implementation, at latest and at the block seen. */
  delegated: boolean;
  /** Its next account nonce, pending transactions included, never below its nonce at the block seen. */
  next: number;
}

/**
 * What an EIP-7702 authorization rests on, read so that a node behind cannot pass a void one. A node a
 * block behind (load-balanced providers) answers "pending" from before transactions the relayer has
 * seen mined: an authorization for a nonce the EOA has used since would look current, and carried, it
 * is skipped on chain (the call reaches a plain account, no wallet runs, no fee is paid; the relayer
 * pays the gas). So the account is also read at the newest block seen, which a node behind refuses:
 * a nonce there past the authorization's voids it, whatever "pending" says; "pending" below it came
 * from an older state and is asked again. Unavailable when no node answered for that block in the tries.
 */
export async function readAuthorizationState(client: PublicClient, wallet: Address, auth: Authorization, seen: () => bigint): Promise<AccountState> {
  let why = '';
  const state = await askAgainWhileBehind(async (): Promise<AccountState | undefined> => {
    const at = seen();
    // In one JSON-RPC batch: one node answers all four.
    const pinned = at >= 0n ? { blockNumber: at } : { blockTag: 'latest' as const };
    try {
      const [code, codeAtSeen, nonce, pending] = await Promise.all([
        client.getCode({ address: wallet }),
        client.getCode({ address: wallet, ...pinned }),
        client.getTransactionCount({ address: wallet, ...pinned }),
        client.getTransactionCount({ address: wallet, blockTag: 'pending' }),
      ]);
      // Sent without the authorization only on both reads: a wrong "delegated" would cost the relayer a call to a plain account.
      const delegated = delegatedTo(code) === auth.implementation && delegatedTo(codeAtSeen) === auth.implementation;
      if (pending >= nonce || nonce > auth.nonce) return { delegated, next: Math.max(pending, nonce) };
      why = `its pending nonce was answered as ${pending}, below its nonce ${nonce} at that block`;
    } catch (err) {
      why = `refused (${(err instanceof Error ? err.message : String(err)).split('\n')[0].slice(0, 160)})`;
    }
    return undefined;
  });
  if (state) return state;
  throw new RelayError('unavailable', `the chain's node is behind: the account of ${getAddress(wallet)} at block ${seen()}, which this relayer has seen, was ${why}; try again`);
}
