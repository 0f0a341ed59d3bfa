import type { Hex, PublicClient } from 'viem';
import type { RawReceipt } from '../receipts.ts';
import { isRateLimited, refusedByNode } from '../../chain/node-errors.ts';

/**
 * A read that failed without the node saying anything of the transaction (a 429, no slot of its budget in
 * time, a transport failure): never "not mined", which after a grace reads as a slot taken by someone else.
 */
const saysNothing = (err: unknown) => isRateLimited(err) || !refusedByNode(err);

/** Blocks read whole at most per sweep; a longer gap (a restart, a stalled node) reads receipts one by one. */
const MAX_BLOCKS = 16;
/** Refusals of eth_getBlockReceipts after which the node is taken not to have it. */
const GIVE_UP_AFTER = 3;

/**
 * Receipts of our transactions, a block at a time: the blocks since the last sweep are read with
 * eth_getBlockReceipts (one call however many of ours each holds), and only what they did not hold is
 * asked for by hash. A node without the method is asked by hash, as before.
 */
export class BlockReceipts {
  private scannedTo = -1;
  private refusals = 0;

  constructor(private readonly client: PublicClient) {}

  private one(hash: Hex): Promise<RawReceipt | null> {
    return this.client.request({ method: 'eth_getTransactionReceipt', params: [hash] }).catch((err) => {
      if (saysNothing(err)) throw err;
      return null;
    }) as Promise<RawReceipt | null>;
  }

  /** The receipt of each hash (null: not mined, as far as the node says), read at `head`. */
  async find(hashes: Hex[], head: number): Promise<Map<string, RawReceipt | null>> {
    const out = new Map<string, RawReceipt | null>();
    if (hashes.length === 0) return out;
    const from = Math.max(this.scannedTo + 1, head - MAX_BLOCKS + 1);
    const blocks = this.scannedTo < 0 ? 0 : head - from + 1;
    // Whole blocks only when they are fewer calls than the hashes themselves.
    if (this.refusals < GIVE_UP_AFTER && blocks > 0 && blocks < hashes.length + 1) {
      const wanted = new Set(hashes.map((h) => h.toLowerCase()));
      const read = await Promise.all(
        Array.from({ length: blocks }, (_, i) =>
          (this.client.request({ method: 'eth_getBlockReceipts' as never, params: [`0x${(from + i).toString(16)}`] as never }) as Promise<RawReceipt[] | null>).then(
            (r) => {
              this.refusals = 0;
              return r ?? [];
            },
            (err) => {
              // Only the node's own refusal says it lacks the method; the hashes are asked one by one either way.
              if (!saysNothing(err)) this.refusals++;
              return null;
            },
          ),
        ),
      );
      for (const list of read) for (const r of list ?? []) if (wanted.has(r.transactionHash.toLowerCase())) out.set(r.transactionHash.toLowerCase(), r);
    }
    this.scannedTo = Math.max(this.scannedTo, head);
    const rest = hashes.filter((h) => !out.has(h.toLowerCase()));
    const single = await Promise.all(rest.map((h) => this.one(h)));
    rest.forEach((h, i) => out.set(h.toLowerCase(), single[i]));
    return out;
  }

  /** One receipt by hash (a reorg's re-read). */
  get(hash: Hex) {
    return this.one(hash);
  }
}
