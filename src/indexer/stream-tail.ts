import type { TransactionReceipt } from 'viem';
import { readBlockReceipts } from '../chain/block-receipts.ts';
import type { ChainClient } from '../chain/client.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import type { BalanceRow, BalanceReader } from './balance-reader.ts';
import type { Cursor } from './follower.ts';

/** Blocks read in one go before the tail looks at the cursor again (it goes on at once while behind). */
const BLOCKS_PER_STEP = 32n;
/** Balance rows read per query: a step that changed many holders is handed out in pages this size. */
const BALANCE_PAGE = 500;
/** Block hashes remembered to notice that a block handed out left the chain (its child names another parent). */
const RECENT = 128;
/**
 * Receipts of the blocks handed out kept to tell the streams, after a reorg, which frames left the chain
 * (at most RECENT blocks): a busy chain's 128 blocks hold tens of thousands; a reorg reaching past what is
 * kept is logged, its older blocks' frames are not told as removed.
 */
const KEPT_RECEIPTS = 10_000;

/** One block the indexer has passed: its receipts (on a watchlist chain, those that touch a watched contract). */
export interface TailBlock {
  number: bigint;
  hash: string;
  parentHash: string;
  /** Seconds since the epoch. */
  timestamp: number;
  receipts: TransactionReceipt[];
  /** A watchlist chain's contracts (a log of another is not the index's); undefined: every contract is. */
  watched?: ReadonlySet<string>;
}

/** A stream fed by the tail: blocks (receipts and logs), a contract's balances, or both. */
export interface TailSubscriber {
  /** Each block the indexer passed since the subscriber came, in order. */
  block?(b: TailBlock): void;
  /**
   * A block handed to `block` left the chain (a reorg): its frames are to be told again as removed. Newest
   * first, each before the new fork's blocks are handed out; only blocks this subscriber was handed.
   */
  removed?(b: TailBlock): void;
  /** The balances of `contract` changed in those blocks, as they are now (zero for a holder that sold out). */
  balances?: { contract: string; changed(rows: BalanceRow[]): void };
}

export interface StreamTailDeps {
  chain: ChainClient;
  /** The indexer's cursor on this chain: the tail never hands out a block above it. */
  cursor(): Promise<Cursor | null>;
  reads: Pick<BalanceReader, 'updatesSince'>;
  /** A watchlist chain's contracts, read each step (projects add some while streams are open); undefined: scope all. */
  watched?: () => Promise<string[]>;
  pollMs: number;
  log: Logger;
  metrics?: Metrics;
}

/**
 * What the indexer reads from one chain, handed to the open streams (SubscribeReceipts, SubscribeEvents,
 * SubscribeBalanceUpdates) as it reads it: every block its cursor passes (so `confirmations` behind the
 * head), read once per process with all its receipts (every transaction, or those touching the watchlist),
 * whatever number of streams, and the balance rows the indexer changed in those blocks. Wherever the
 * follower runs (this process or `metarelay worker`), the cursor row says how far it got. It runs only
 * while a stream is open: then it follows the chain's shared head and looks at the cursor every `pollMs`;
 * with none, it costs nothing. A block handed out that leaves the chain is handed to the streams that got it
 * again as removed, before the new fork. Memory: the blocks handed out kept for that (KEPT_RECEIPTS) and
 * one page of balances at a time.
 */
export class StreamTail {
  private readonly subs = new Set<TailSubscriber>();
  /** The last block handed out (null: no stream open, or the indexer has no cursor yet). */
  private pos: bigint | null = null;
  /** Balance rows changed at or below this block were handed out. */
  private balancesAfter: bigint | null = null;
  private readonly recent = new Map<bigint, string>();
  /** The blocks handed to block streams, by number (oldest first), kept to tell which frames a reorg removed. */
  private readonly kept = new Map<bigint, TailBlock>();
  private keptReceipts = 0;
  /** Per block stream, the height after which it was handed every block (blocks at or below it it never got). */
  private readonly joined = new Map<TailSubscriber, bigint>();
  /** Moves when the first stream of a new spell comes: a step of the spell before gives up. */
  private spell = 0;
  private running = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private offHead: (() => void) | undefined;
  private readonly failures: FailureStreak;

  constructor(private readonly d: StreamTailDeps) {
    this.failures = new FailureStreak(d.log, 'indexer streams: following the index', { chain: d.chain.name });
  }

  /** Streams attached now. */
  get streams(): number {
    return this.subs.size;
  }

  /** Attaches a stream from the cursor's block on; the returned function detaches it. */
  subscribe(s: TailSubscriber): () => void {
    if (!this.subs.size) {
      // A new spell starts at the cursor, not where the last one stopped.
      this.spell++;
      this.pos = null;
      this.balancesAfter = null;
      this.recent.clear();
      this.kept.clear();
      this.keptReceipts = 0;
    }
    this.subs.add(s);
    this.offHead ??= this.d.chain.head.subscribe(() => this.kick());
    this.kick();
    return () => {
      this.subs.delete(s);
      this.joined.delete(s);
      if (this.subs.size) return;
      // Nobody listens: the head reader may stop polling, and the next stream starts at the cursor.
      this.offHead?.();
      this.offHead = undefined;
      clearTimeout(this.timer);
    };
  }

  private kick(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    clearTimeout(this.timer);
    this.running = true;
    void this.run();
  }

  private async run(): Promise<void> {
    try {
      let more: boolean;
      do {
        this.again = false;
        more = await this.step();
      } while ((more || this.again) && this.subs.size);
      this.failures.succeeded();
    } catch (err) {
      this.failures.failed(err);
    } finally {
      this.running = false;
      // The cursor moves in another process too: looked at every pollMs while a stream is open.
      if (this.subs.size) this.timer = setTimeout(() => this.kick(), this.d.pollMs).unref();
    }
  }

  /** One step towards the cursor; true when there is more to hand out at once. */
  private async step(): Promise<boolean> {
    if (!this.subs.size) return false;
    const spell = this.spell;
    const cur = await this.d.cursor();
    if (!cur || spell !== this.spell) return false;
    if (this.pos === null || this.balancesAfter === null) {
      this.pos = cur.block;
      this.balancesAfter = cur.block;
      return false;
    }
    const told = this.recent.get(cur.block);
    if (cur.block < this.pos || (told !== undefined && cur.hash !== '0x' && told !== cur.hash.toLowerCase())) {
      // The indexer unwound a reorg (and may have applied the new fork already): back to the last block
      // handed out that is still on the chain; the new fork's blocks are handed out again, and the
      // balances the indexer took back and re-applied are told again as they now are.
      const ancestor = await this.forkPoint(cur.block);
      if (spell !== this.spell) return false;
      this.back(ancestor);
    }
    let pos: bigint = this.pos;
    if ([...this.subs].some((s) => s.block)) {
      const to = cur.block < pos + BLOCKS_PER_STEP ? cur.block : pos + BLOCKS_PER_STEP;
      const watched = this.d.watched ? new Set((await this.d.watched()).map((a) => a.toLowerCase())) : undefined;
      while (pos < to) {
        const n = pos + 1n;
        const read = await readBlockReceipts(this.d.chain, n);
        if (!read || spell !== this.spell) return false;
        this.d.metrics?.indexerStreamBlocks.inc({ chain: this.d.chain.name });
        const parentSeen = this.recent.get(n - 1n);
        if (parentSeen && parentSeen !== read.header.parentHash.toLowerCase()) {
          // The block handed out at n-1 left the chain: step back until a child joins what was handed out.
          this.back(n - 2n);
          return true;
        }
        this.remember(n, read.header.hash);
        const block: TailBlock = {
          number: n,
          hash: read.header.hash,
          parentHash: read.header.parentHash.toLowerCase(),
          timestamp: Number(read.header.timestamp),
          receipts: watched ? read.receipts.filter((r) => touches(r, watched)) : read.receipts,
          watched,
        };
        this.keep(block);
        for (const s of this.subs) {
          if (!s.block) continue;
          if (!this.joined.has(s)) this.joined.set(s, n - 1n);
          s.block(block);
        }
        this.pos = pos = n;
      }
    } else {
      this.pos = pos = cur.block;
      // Without block streams, the cursor's own block is what a reorg is noticed by.
      if (cur.hash !== '0x') this.remember(cur.block, cur.hash);
    }
    await this.balances(spell, cur.block < pos ? cur.block : pos);
    return pos < cur.block;
  }

  /** Hands out the balance rows changed after balancesAfter and at or below `upTo`, per contract streamed. */
  private async balances(spell: number, upTo: bigint): Promise<void> {
    const after = this.balancesAfter;
    if (after === null || upTo <= after) return;
    const byContract = new Map<string, TailSubscriber[]>();
    for (const s of this.subs) if (s.balances) byContract.set(s.balances.contract, [...(byContract.get(s.balances.contract) ?? []), s]);
    for (const [contract, subs] of byContract) {
      for (let offset = 0; ; offset += BALANCE_PAGE) {
        const rows = await this.d.reads.updatesSince(contract, Number(after), offset, BALANCE_PAGE);
        if (spell !== this.spell) return;
        // Rows move on as the indexer does: those above `upTo` are the next step's.
        const mine = rows.filter((r) => BigInt(r.blockNumber) <= upTo);
        if (mine.length) for (const s of subs) if (this.subs.has(s)) s.balances!.changed(mine);
        if (rows.length < BALANCE_PAGE || mine.length < rows.length) break;
      }
    }
    this.balancesAfter = upTo;
  }

  /** The highest block remembered at or below `below` that the node still has (one kept header each, usually no call). */
  private async forkPoint(below: bigint): Promise<bigint> {
    const heights = [...this.recent.keys()].filter((n) => n <= below).sort((x, y) => (x < y ? 1 : -1));
    for (const n of heights) {
      const h = await this.d.chain.head.block(n, this.d.chain.public);
      if (h && h.hash === this.recent.get(n)) return n;
    }
    // Deeper than anything remembered: from below the oldest (or the cursor, with nothing remembered).
    return heights.length ? heights[heights.length - 1]! - 1n : below;
  }

  /** Steps back to `to`: the blocks handed out above it left the chain, and the streams handed them are told so. */
  private back(to: bigint): void {
    const subs = [...this.joined].filter(([s]) => this.subs.has(s));
    const pos = this.pos ?? to;
    // Blocks handed out between the first a stream got and the oldest kept were dropped for memory: untold.
    const oldest = this.kept.size ? this.kept.keys().next().value! : pos + 1n;
    const first = subs.reduce((m, [, after]) => (after < m ? after : m), pos);
    const untold = (oldest - 1n < pos ? oldest - 1n : pos) - (first > to ? first : to);
    if (untold > 0n)
      this.d.log.warn({ chain: this.d.chain.name, blocks: untold.toString() }, 'indexer streams: a reorg removed blocks older than the receipts kept; their frames were not told as removed');
    for (const n of [...this.kept.keys()].filter((k) => k > to).reverse()) {
      const b = this.kept.get(n)!;
      for (const [s, after] of subs) if (after < n) s.removed?.(b);
      this.kept.delete(n);
      this.keptReceipts -= b.receipts.length;
    }
    // What the streams are handed from here on is theirs again from `to`.
    for (const [s, after] of this.joined) if (after > to) this.joined.set(s, to);
    for (const n of [...this.recent.keys()]) if (n > to) this.recent.delete(n);
    this.pos = to;
    if (this.balancesAfter !== null && this.balancesAfter > to - 1n) this.balancesAfter = to - 1n;
  }

  /** Keeps a block handed out, dropping the oldest past RECENT blocks or KEPT_RECEIPTS receipts. */
  private keep(b: TailBlock): void {
    this.kept.set(b.number, b);
    this.keptReceipts += b.receipts.length;
    for (const [n, old] of this.kept) {
      if (this.kept.size <= 1 || (this.kept.size <= RECENT && this.keptReceipts <= KEPT_RECEIPTS)) break;
      this.kept.delete(n);
      this.keptReceipts -= old.receipts.length;
    }
  }

  private remember(n: bigint, hash: string): void {
    this.recent.set(n, hash.toLowerCase());
    if (this.recent.size > RECENT) this.recent.delete(this.recent.keys().next().value!);
  }
}

/** A receipt of a watchlist chain's index: the transaction called a watched contract or one of them logged. */
function touches(r: TransactionReceipt, watched: ReadonlySet<string>): boolean {
  return (r.to !== null && watched.has(r.to.toLowerCase())) || r.logs.some((l) => watched.has(l.address.toLowerCase()));
}
