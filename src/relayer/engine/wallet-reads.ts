import type { Address, PublicClient } from 'viem';
import type { SequenceContext } from '../context.ts';
import { readNonces } from '../nonces.ts';
import { recogniseDeferring, recognisePinned, type WalletCache, type WalletKind } from '../intake/wallets.ts';
import { readAuthorizationState, type AccountState, type Authorization } from '../intake/authorization.ts';
import { RelayError } from '../errors.ts';
import type { MetaTxnRow } from '../store.ts';

/**
 * What the dispatcher reads of wallets — their code's kind and their nonces — once per head: a queue
 * of rows that are not ready yet must not cost node calls on every pass. Reads for a new head start
 * afresh; within a head only what was not read yet is asked.
 */
export class WalletReads {
  private nonces: { head: number; at: Map<string, bigint> } = { head: -1, at: new Map() };
  private kinds: { head: number; at: Map<Address, WalletKind> } = { head: -1, at: new Map() };

  constructor(
    private readonly client: () => PublicClient,
    private readonly context: SequenceContext,
    private readonly known: WalletCache,
  ) {}

  /**
   * What each wallet's code is (lower-case addresses), read once per head. A wallet proxy whose slot read
   * zero (a node behind answered it: Recognised.behind) is recognised again at `head`, a block seen; one
   * no node answered for is left out of the map, unknown: not judged on this pass, read again at the next.
   */
  async kindsAt(head: number, wallets: Address[]): Promise<Map<Address, WalletKind>> {
    if (this.kinds.head !== head) this.kinds = { head, at: new Map() };
    const missing = [...new Set(wallets.map((w) => w.toLowerCase() as Address))].filter((w) => !this.kinds.at.has(w));
    const read = await recogniseDeferring(this.client(), this.context, missing, this.known);
    const again = read.behind.length ? await recognisePinned(this.client(), this.context, read.behind, this.known.at(BigInt(head))) : null;
    for (const [w, k] of read.kinds) {
      if (!read.behind.includes(w)) this.kinds.at.set(w, k);
      else if (again && !again.behind.includes(w)) this.kinds.at.set(w, again.kinds.get(w)!);
    }
    return this.kinds.at;
  }

  /** Wallet nonces per (wallet, space), in the order asked, read once per head. */
  async noncesAt(head: number, items: { wallet: Address; space: bigint }[]): Promise<bigint[]> {
    if (this.nonces.head !== head) this.nonces = { head, at: new Map() };
    const key = (x: { wallet: Address; space: bigint }) => `${x.wallet}:${x.space}`;
    const missing = [...new Map(items.filter((x) => !this.nonces.at.has(key(x))).map((x) => [key(x), x])).values()];
    const read = await readNonces(this.client(), missing);
    missing.forEach((x, i) => this.nonces.at.set(key(x), read[i]));
    return items.map((x) => this.nonces.at.get(key(x))!);
  }
}

/**
 * An EIP-7702 meta-transaction's authorization at send time: none to carry when the EOA already
 * delegates to the implementation, carried while the EOA's nonce is the one it signed for, void (the
 * reason) once the EOA sent a transaction of its own since. Read never from a node behind the block
 * seen (readAuthorizationState): `behind` (the reason) when no node answered for it, and the
 * meta-transaction is left queued, nothing signed.
 */
export async function authorizationToCarry(client: PublicClient, row: MetaTxnRow, seen: () => bigint): Promise<{ carry?: Authorization; void?: string; behind?: string }> {
  const a = row.authorization;
  if (!a) return {};
  const wallet = row.wallet as Address;
  let s: AccountState;
  try {
    s = await readAuthorizationState(client, wallet, a, seen);
  } catch (err) {
    if (err instanceof RelayError && err.kind === 'unavailable') return { behind: err.message };
    throw err;
  }
  if (s.delegated) return {};
  if (s.next !== a.nonce)
    return { void: `its EIP-7702 authorization is void: it is for account nonce ${a.nonce} of ${wallet}, which is at ${s.next} (the EOA sent a transaction since); nothing was sent` };
  return { carry: a };
}
