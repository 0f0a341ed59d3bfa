import { getAddress, isAddress, type Address, type Hex, type PublicClient } from 'viem';
import { pauseAbout } from '../../util/ask-again.ts';
import type { ChainHead } from '../../chain/head.ts';
import type { SequenceContext } from '../context.ts';
import { RelayError } from '../errors.ts';
import { STALE_PAUSE_MS, STALE_TRIES, askAgainWhileBehind } from '../intake/ask-again.ts';
import { checkAuthorization, readAuthorizationState, type Authorization } from '../intake/authorization.ts';
import { BundleError, decodeCall, selectorOf, type DecodedCall } from '../intake/bundle.ts';
import { describeKind, recogniseDeferring, type Recognised, type WalletCache, type WalletKind } from '../intake/wallets.ts';

/*
 * What a call is, decoded and checked against the chain: which addresses are Sequence wallets (their
 * code, their implementation slot), an EIP-7702 authorization it brings, and a wallet upgrade to code
 * this relayer does not know. Its own file because recognising wallets on a node that may be behind
 * (asked again at the block seen) is a job of its own; ChainRelayer (chain-relayer.ts) keeps the block
 * seen and hands it in.
 */

/** What recognition reads from its chain's relayer: the node, the wallets seen, and the block seen. */
export interface RecognitionChain {
  readonly chainId: number;
  readonly context: SequenceContext;
  readonly client: PublicClient;
  readonly wallets: WalletCache;
  /** Wallet implementations an EOA may delegate to (EIP-7702), lower case. */
  readonly delegates: readonly Address[];
  /** The newest block seen (-1 before any). */
  readonly seen: bigint;
  readonly chainHead: Pick<ChainHead, 'number'>;
  observeBlock(block: bigint | number): void;
}

export class WalletRecognition {
  constructor(private readonly c: RecognitionChain) {}

  /**
   * Whether `address` has code at the newest block seen: asked when a read at "latest" found none,
   * which a node behind gives for a wallet the relayer deployed a block ago. A node without that
   * block yet is asked again; undecided, false (the read at latest stands).
   */
  private async codeAtSeen(address: Address): Promise<boolean> {
    if (this.c.seen < 0n) return false;
    const code = await askAgainWhileBehind(async () => (await this.c.client.getCode({ address, blockNumber: this.c.seen })) ?? '0x');
    return code !== undefined && code !== '0x';
  }

  /**
   * Wallets recognised again at the newest block seen, after `latest` (the read at "latest") met a node
   * behind: a wallet with no code there, or a proxy whose implementation slot read zero (latest.behind).
   * A node without that block refuses it: asked again at once, then pausing a little longer each time.
   * A proxy with no code even at the block seen was deployed after it (its code came from a node ahead
   * of every block seen): the head is read, and the block seen moves on to it when it is newer.
   * Undecided, the read at latest stands for "no code"; a zero slot is never judged on: Unavailable.
   */
  private async recogniseAtSeen(asked: readonly Address[], latest: Recognised): Promise<Recognised> {
    const again = await askAgainWhileBehind(async () => {
      const r = await recogniseDeferring(this.c.client, this.c.context, asked, this.c.wallets.at(this.c.seen));
      if (r.behind.length === 0 && !latest.behind.some((a) => r.kinds.get(a) === 'empty')) return r;
      const head = await this.c.chainHead.number().catch(() => -1n);
      if (head > this.c.seen) this.c.observeBlock(head);
      return undefined;
    });
    if (again) return again;
    const unsure = latest.behind[0];
    if (!unsure) return latest;
    throw new RelayError(
      'unavailable',
      `the chain's node is behind: the implementation slot of wallet ${getAddress(unsure)} was read from a block before its deployment, and no node answered for block ${this.c.seen}, which this relayer has seen; try again`,
    );
  }

  /**
   * An EIP-7702 authorization a call brings, checked before anything is accepted: this chain, an accepted
   * implementation, signed by the wallet itself, for the EOA's next account nonce (pending included: a
   * transaction of its own in the pool would void it first), and only with a call of the wallet itself.
   * The nonce is never one a node behind the block seen answered (readAuthorizationState): Unavailable then.
   */
  async checkDelegation(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    const w = wallet.toLowerCase() as Address;
    await this.checkDelegationShape(auth, w, call);
    const { next } = await readAuthorizationState(this.c.client, w, auth, () => this.c.seen);
    if (next !== auth.nonce) {
      throw new RelayError('invalidArgument', `authorization.nonce: ${auth.nonce} is not the account nonce of ${getAddress(w)} (${next}); sign the authorization for its next nonce`);
    }
  }

  /** What an authorization must be, known without the chain: with a call of the wallet itself, for this chain, an accepted implementation, signed by the wallet. */
  async checkDelegationShape(auth: Authorization, wallet: string, call: DecodedCall): Promise<void> {
    const w = wallet.toLowerCase() as Address;
    if (call.kind !== 'wallet' || call.entrypoint !== w) {
      throw new RelayError('invalidArgument', 'authorization: only with a call of the delegating wallet itself (contract = walletAddress, its execute)');
    }
    await checkAuthorization(auth, { field: 'authorization', chainId: this.c.chainId, wallet: w, accepted: this.c.delegates });
  }

  /** Decodes (syntax and structure only, no node call); `isWallet` decides which execute calls are nested bundles. */
  decode(walletAddress: string, contract: string, input: string, isWallet?: (a: Address) => boolean): DecodedCall {
    if (!isAddress(walletAddress, { strict: false })) throw new RelayError('invalidArgument', `walletAddress "${walletAddress}" is not an address`);
    if (!isAddress(contract, { strict: false })) throw new RelayError('invalidArgument', `contract "${contract}" is not an address`);
    if (!/^0x([0-9a-fA-F]{2})*$/.test(input)) throw new RelayError('invalidArgument', 'input is not 0x-prefixed hex bytes');
    try {
      return decodeCall(this.c.chainId, this.c.context, walletAddress.toLowerCase() as Address, contract.toLowerCase() as Address, input as Hex, { isWallet });
    } catch (err) {
      if (err instanceof BundleError) throw new RelayError('invalidArgument', err.message);
      throw err;
    }
  }

  /**
   * Decodes a call against the chain: every address the call treats as a wallet is asked for its code
   * (one batch), and only real Sequence wallets are unfolded. With `strict` (intake), the wallet a
   * wallet-form call targets must be one, and a wallet the call deploys must not exist yet. With
   * `deferSlot`, the wallet a wallet-form call targets, a proxy already known, may come back 'wallet'
   * before its implementation slot is read: it is then in `unverified`, for the caller's probe to read
   * and check (checkCall). Nested wallets and deploys never are: their kinds decide how the call decodes.
   */
  async recognise(
    walletAddress: string,
    contract: string,
    input: string,
    strict: boolean,
    auth?: Authorization | null,
    decoded?: DecodedCall,
    deferSlot = false,
  ): Promise<{ call: DecodedCall; kinds: Map<Address, WalletKind>; unverified: Address[] }> {
    const first = decoded ?? this.decode(walletAddress, contract, input);
    const asked = [...(first.kind === 'wallet' ? [first.entrypoint] : []), ...first.candidates, ...first.deploys];
    const defer = deferSlot && !auth && first.kind === 'wallet' && !first.candidates.includes(first.entrypoint) && !first.deploys.includes(first.entrypoint) ? first.entrypoint : undefined;
    const [read] = await Promise.all([recogniseDeferring(this.c.client, this.c.context, asked, this.c.wallets, defer), auth ? this.checkDelegation(auth, walletAddress, first) : undefined]);
    let { kinds, unverified } = read;
    // A node behind's answers are not the last word: a zero implementation slot beside wallet proxy code
    // (read from a state before the deployment), and "no code" for a wallet that has code at a block
    // already seen. Recognised again at that block (a node behind refuses it, and is not asked twice in
    // a row by a load balancer's round robin); "no code" else at latest a few times more.
    // An EOA bringing its authorization has no code of its own to find: its kind is the delegation's (below).
    const undeployed = () => strict && !auth && first.kind === 'wallet' && kinds.get(first.entrypoint) === 'empty';
    if (read.behind.length > 0 || (undeployed() && (await this.codeAtSeen(first.entrypoint)))) {
      ({ kinds, unverified } = await this.recogniseAtSeen(asked, read));
    }
    for (let attempt = 1; undeployed() && attempt < STALE_TRIES && (await this.codeAtSeen(first.entrypoint)); attempt++) {
      await pauseAbout(STALE_PAUSE_MS * attempt);
      const again = await recogniseDeferring(this.c.client, this.c.context, asked, this.c.wallets, defer);
      ({ kinds, unverified } = again.behind.length > 0 ? await this.recogniseAtSeen(asked, again) : again);
    }
    // With the delegation its authorization applies, the EOA runs an accepted wallet implementation.
    if (auth) kinds.set(first.entrypoint, 'wallet');
    if (strict) {
      if (first.kind === 'wallet' && kinds.get(first.entrypoint) !== 'wallet') {
        const kind = kinds.get(first.entrypoint)!;
        throw new RelayError('simulationFailed', kind === 'empty' ? `wallet ${describeKind(first.entrypoint, kind)}` : describeKind(first.entrypoint, kind));
      }
      const existing = first.deploys.find((d) => kinds.get(d) !== 'empty');
      if (existing) throw new RelayError('simulationFailed', `the call deploys wallet ${existing}, which already exists`);
    }
    // Decoded again only when a nested execute targets something that is not a wallet: when every one
    // is, the wallet-aware decode unfolds exactly what the first did (a decode hashes every bundle: it
    // was a tenth of intake's CPU done three times per SendMetaTxn).
    const call = first.candidates.every((a) => kinds.get(a) === 'wallet') ? first : this.decode(walletAddress, contract, input, (a) => kinds.get(a) === 'wallet');
    const upgrade = unknownUpgrade(call, this.c.context);
    if (upgrade) throw new RelayError('invalidArgument', upgrade);
    return { call, kinds, unverified };
  }
}

const UPDATE_IMPLEMENTATION = '0x025b22bc';

/**
 * A wallet switching its own implementation to code this relayer does not know: every later bundle of
 * it would run that code, which no longer has to honour signatures, nonces or fees. Not relayed.
 */
function unknownUpgrade(call: DecodedCall, context: SequenceContext): string | null {
  const known = new Set([context.mainModule, context.mainModuleUpgradable].map((a) => a.toLowerCase()));
  for (const l of call.leaves) {
    if (l.delegateCall || l.target !== l.executor || selectorOf(l.data) !== UPDATE_IMPLEMENTATION) continue;
    const to = `0x${l.data.slice(-40)}`.toLowerCase();
    if (!known.has(to)) return `wallet ${l.executor} switches its implementation to ${to}, which is not a Sequence main module this relayer knows`;
  }
  return null;
}
