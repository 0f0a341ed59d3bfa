import { randomBytes } from 'node:crypto';
import type { ChainClient } from '../chain/client.ts';
import type { Db } from '../store/db.ts';
import { decodeChunk } from './chunk.ts';
import { LogReader, UnreadableBlockError } from '../chain/logs.ts';
import type { UnreadBlocks } from '../chain/unread-blocks.ts';
import { TRANSFER_TOPICS, type RawLog } from './decode.ts';
import { applyTransfers, type IndexHooks } from './transfer-store.ts';
import type { IndexScope } from './watchlist.ts';
import { askAgain, atOnce, doubling } from '../util/ask-again.ts';

export interface BackfillProgress {
  id: number;
  chainId: number;
  scope: IndexScope;
  fromBlock: number;
  toBlock: number;
  status: 'RUNNING' | 'DONE';
  /** The contracts it reads, when not every contract of its scope (a contract added to a watchlist). */
  contracts: string[] | null;
  /** Blocks read so far, of `blocks`. */
  done: number;
  blocks: number;
  logs: number;
  malformed: number;
  ranges: { total: number; finished: number; leased: number };
}

export interface BackfillOptions {
  /** Blocks per leased range: the unit two workers split the work by. */
  rangeBlocks: number;
  /** Read only these contracts (default: what the scope reads). */
  contracts?: string[];
}

/** Backfill tasks: blocks [from, to] cut into ranges; each range carries its own cursor (next_block). */
export function backfillStore(db: Db) {
  return {
    async create(chainId: number, scope: IndexScope, from: bigint, to: bigint, o: BackfillOptions): Promise<number> {
      if (to < from) throw new Error(`backfill: toBlock ${to} is before fromBlock ${from}`);
      return db.transaction(async (tx) => {
        const res = await tx.query<{ id: string | number }>('INSERT INTO indexer_backfills (chain_id, scope, from_block, to_block, contracts) VALUES ($1, $2, $3, $4, $5) RETURNING id', [
          chainId,
          scope,
          from.toString(),
          to.toString(),
          o.contracts?.length ? o.contracts.map((c) => c.toLowerCase()).sort() : null,
        ]);
        const id = Number(res.rows[0]!.id);
        const starts: string[] = [];
        const ends: string[] = [];
        for (let s = from; s <= to; s += BigInt(o.rangeBlocks)) {
          const e = s + BigInt(o.rangeBlocks) - 1n;
          starts.push(s.toString());
          ends.push((e > to ? to : e).toString());
        }
        await tx.query(
          `INSERT INTO indexer_backfill_ranges (backfill_id, range_from, range_to, next_block)
           SELECT $1, s, e, s FROM unnest($2::bigint[], $3::bigint[]) AS u(s, e)`,
          [id, starts, ends],
        );
        return id;
      });
    },

    async progress(id: number): Promise<BackfillProgress | null> {
      const res = await db.query<Record<string, string | number | string[] | null>>(
        `SELECT b.id, b.chain_id, b.scope, b.contracts, b.from_block::text AS from_block, b.to_block::text AS to_block, b.status,
                coalesce(sum(LEAST(r.next_block, r.range_to + 1) - r.range_from), 0)::text AS done,
                coalesce(sum(r.logs), 0)::text AS logs, coalesce(sum(r.malformed), 0)::text AS malformed,
                count(r.*)::int AS total, count(*) FILTER (WHERE r.next_block > r.range_to)::int AS finished,
                count(*) FILTER (WHERE r.next_block <= r.range_to AND r.lease_until > now())::int AS leased
           FROM indexer_backfills b LEFT JOIN indexer_backfill_ranges r ON r.backfill_id = b.id
          WHERE b.id = $1 GROUP BY b.id`,
        [id],
      );
      const r = res.rows[0];
      if (!r) return null;
      return {
        id: Number(r.id),
        chainId: Number(r.chain_id),
        scope: r.scope as IndexScope,
        fromBlock: Number(r.from_block),
        toBlock: Number(r.to_block),
        status: r.status as BackfillProgress['status'],
        contracts: (r.contracts as string[] | null) ?? null,
        done: Number(r.done),
        blocks: Number(r.to_block) - Number(r.from_block) + 1,
        logs: Number(r.logs),
        malformed: Number(r.malformed),
        ranges: { total: Number(r.total), finished: Number(r.finished), leased: Number(r.leased) },
      };
    },

    async list(): Promise<BackfillProgress[]> {
      const ids = await db.query<{ id: string | number }>('SELECT id FROM indexer_backfills ORDER BY id DESC LIMIT 50');
      const out: BackfillProgress[] = [];
      for (const r of ids.rows) {
        const p = await this.progress(Number(r.id));
        if (p) out.push(p);
      }
      return out;
    },
  };
}

/** Tries of one chunk before its range is left to the lease, and the first pause between them (doubling). */
const CHUNK_TRIES = 4;
const CHUNK_RETRY_MS = 500;

/** A log reader (its span learned per chain and scope) and the contracts it reads (undefined: every one). */
interface ScopedReader {
  reader: LogReader;
  addresses: (() => Promise<string[]>) | undefined;
}

interface Claimed {
  backfillId: number;
  chainId: number;
  scope: IndexScope;
  rangeFrom: bigint;
  rangeTo: bigint;
  next: bigint;
  contracts: string[] | null;
}

export interface BackfillWorkerDeps {
  db: Db;
  chains: ReadonlyMap<number, ChainClient>;
  /** The address filter for a chain's scope (undefined: every contract). */
  addresses: (chainId: number, scope: IndexScope) => (() => Promise<string[]>) | undefined;
  /** Most blocks per eth_getLogs (per chain); shrinks when the node refuses. */
  chunkBlocks: number | ((chainId: number) => number);
  leaseSec: number;
  /** Told, per chain, the balances and new transfers each chunk applied, on its transaction. */
  hooks?: (chainId: number) => IndexHooks | undefined;
  /**
   * Where a block no read can get is recorded when passed over (the chain's follower's, whose
   * retries read it later); without it such a block fails the range, retried when its lease runs out.
   */
  unread?: (chainId: number) => UnreadBlocks | undefined;
  /**
   * Called after each chunk is committed (the CLI draws its progress bar from it). What it throws
   * stops the worker as a crash would: the committed chunks stay, the range's lease runs out.
   */
  onChunk?: (c: { backfillId: number; from: bigint; to: bigint; logs: number; malformed: number }) => void | Promise<void>;
}

/**
 * Works through backfill ranges: claims one (a lease, SKIP LOCKED, so workers of several processes
 * take different ranges), reads it chunk by chunk, and commits each chunk's transfers with the
 * range's cursor move. A worker that dies leaves its range leased until the lease runs out; the
 * next claimer resumes at the range's cursor. Re-reading a chunk is harmless: transfers are
 * recorded once (transfer-store.ts).
 */
export class BackfillWorker {
  readonly owner = `bf-${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly readers = new Map<string, ScopedReader>();
  private halting = false;

  constructor(private readonly d: BackfillWorkerDeps) {}

  /** Stops after the chunk in progress, handing its range back (resumed at its cursor by the next claimer). */
  halt(): void {
    this.halting = true;
  }

  private async claim(backfillId?: number): Promise<Claimed | null> {
    const claimIn = async (q: Pick<Db, 'query'>) => {
      const res = await q.query<Record<string, string | number | string[] | null>>(
        `WITH c AS (
           SELECT r.backfill_id, r.range_from FROM indexer_backfill_ranges r JOIN indexer_backfills b ON b.id = r.backfill_id
            WHERE b.status = 'RUNNING' AND r.next_block <= r.range_to AND (r.lease_until IS NULL OR r.lease_until < now())
              AND ($3::bigint IS NULL OR r.backfill_id = $3) AND b.chain_id = ANY($4::int[])
            ORDER BY r.backfill_id, r.range_from LIMIT 1 FOR UPDATE OF r SKIP LOCKED)
         UPDATE indexer_backfill_ranges r SET lease_owner = $1, lease_until = now() + make_interval(secs => $2)
           FROM c, indexer_backfills b
          WHERE r.backfill_id = c.backfill_id AND r.range_from = c.range_from AND b.id = r.backfill_id
         RETURNING r.backfill_id, b.chain_id, b.scope, b.contracts, r.range_from::text AS range_from, r.range_to::text AS range_to, r.next_block::text AS next_block`,
        // Only chains this process reads: another's ranges stay free for the processes that can.
        [this.owner, this.d.leaseSec, backfillId ?? null, [...this.d.chains.keys()]],
      );
      const r = res.rows[0];
      return r
        ? {
            backfillId: Number(r.backfill_id),
            chainId: Number(r.chain_id),
            scope: r.scope as IndexScope,
            rangeFrom: BigInt(r.range_from as string),
            rangeTo: BigInt(r.range_to as string),
            next: BigInt(r.next_block as string),
            contracts: (r.contracts as string[] | null) ?? null,
          }
        : null;
    };
    // On PostgreSQL the claim is its own transaction, so the row lock lasts only as long as the claim.
    return this.d.db.kind === 'pglite' ? claimIn(this.d.db) : this.d.db.transaction((tx) => claimIn(tx));
  }

  private readerFor(chain: ChainClient, scope: IndexScope, contracts: string[] | null): ScopedReader {
    const k = `${chain.chainId}:${scope}:${contracts?.join(',') ?? ''}`;
    let r = this.readers.get(k);
    if (!r) {
      const span = typeof this.d.chunkBlocks === 'number' ? this.d.chunkBlocks : this.d.chunkBlocks(chain.chainId);
      const addresses = contracts ? async () => contracts : this.d.addresses(chain.chainId, scope);
      r = { reader: new LogReader(chain, span, TRANSFER_TOPICS), addresses };
      this.readers.set(k, r);
    }
    return r;
  }

  /** Works until no range is left to claim (of one backfill, or of any); returns the ranges finished. */
  async runUntilIdle(backfillId?: number): Promise<number> {
    let finished = 0;
    while (!this.halting) {
      const c = await this.claim(backfillId);
      if (!c) break;
      await this.work(c);
      finished++;
    }
    await this.settle();
    return finished;
  }

  private async work(c: Claimed): Promise<void> {
    const chain = this.d.chains.get(c.chainId);
    if (!chain) throw new Error(`backfill ${c.backfillId}: chain ${c.chainId} is not configured here`);
    const scoped = this.readerFor(chain, c.scope, c.contracts);
    const unread = this.d.unread?.(c.chainId);
    let next = c.next;
    while (next <= c.rangeTo && !this.halting) {
      const { to, passed, passedHash, chunk } = await this.readChunk(chain, scoped, next, c.rangeTo, unread);
      const kept = await this.d.db.transaction(async (tx) => {
        // The lease is checked and extended in the transaction that applies the chunk: a worker
        // whose lease was taken over writes nothing.
        const own = await tx.query(
          `UPDATE indexer_backfill_ranges SET next_block = $4, logs = logs + $5, malformed = malformed + $6,
                  lease_until = now() + make_interval(secs => $7)
            WHERE backfill_id = $1 AND range_from = $2 AND lease_owner = $3 AND next_block = $8 RETURNING 1`,
          [c.backfillId, c.rangeFrom.toString(), this.owner, (to + 1n).toString(), chunk.logs, chunk.malformed, this.d.leaseSec, next.toString()],
        );
        if (!own.rows.length) return false;
        await applyTransfers(tx, c.chainId, chunk.entries, this.d.hooks?.(c.chainId));
        if (passed) await unread!.flag(tx, passed, passedHash!.toLowerCase());
        return true;
      });
      if (!kept) return;
      if (passed) await unread!.flagged(passed);
      await this.d.onChunk?.({ backfillId: c.backfillId, from: next, to, logs: chunk.logs, malformed: chunk.malformed });
      next = to + 1n;
    }
    await this.d.db.query('UPDATE indexer_backfill_ranges SET lease_owner = NULL, lease_until = NULL WHERE backfill_id = $1 AND range_from = $2 AND lease_owner = $3', [
      c.backfillId,
      c.rangeFrom.toString(),
      this.owner,
    ]);
  }

  /**
   * One chunk read and dated. A failure a provider makes in passing (a 429, a 502, a dropped
   * connection) is tried again here, a few times with a growing pause, rather than failing the range
   * (and a CLI backfill) at the first one; what still fails is thrown for the lease to retry.
   */
  private async readChunk(chain: ChainClient, s: ScopedReader, from: bigint, to: bigint, unread: UnreadBlocks | undefined) {
    return askAgain(
      async () => {
        const { to: end, logs, passed } = await this.readOrPassOver(s, from, to, unread);
        const passedHash = passed ? (await chain.public.getBlock({ blockNumber: passed.block })).hash : undefined;
        return { to: end, passed, passedHash, chunk: await decodeChunk(chain, logs) };
      },
      () => !this.halting,
      CHUNK_TRIES,
      doubling(CHUNK_RETRY_MS),
    );
  }

  /**
   * Logs of [from, to'] as LogReader.read gives them. A single block no read can get is tried
   * `blockAttempts` times in a row, then passed over: [block, block] with no logs, and `passed` to
   * record it (read later by the follower's retries; transfers are recorded once, in any order).
   */
  private async readOrPassOver(s: ScopedReader, from: bigint, to: bigint, unread: UnreadBlocks | undefined): Promise<{ to: bigint; logs: RawLog[]; passed?: UnreadableBlockError }> {
    const unreadable = (err: unknown): err is UnreadableBlockError => err instanceof UnreadableBlockError && unread !== undefined;
    try {
      return await askAgain(async () => s.reader.read(from, to, s.addresses ? await s.addresses() : undefined), unreadable, unread?.attempts ?? 1, atOnce);
    } catch (err) {
      if (unreadable(err)) return { to: err.block, logs: [], passed: err };
      throw err;
    }
  }

  /** Marks backfills whose every range is read as DONE. */
  private async settle(): Promise<void> {
    await this.d.db.query(
      `UPDATE indexer_backfills b SET status = 'DONE', finished_at = now()
        WHERE status = 'RUNNING' AND NOT EXISTS (SELECT 1 FROM indexer_backfill_ranges r WHERE r.backfill_id = b.id AND r.next_block <= r.range_to)`,
    );
  }
}
