import { findCause } from '../util/error.ts';
import type { Db, Queryable } from '../store/db.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import type { ChainClient } from './client.ts';
import { UnreadableBlockError } from './logs.ts';

export interface UnreadBlock {
  chainId: number;
  reader: string;
  block: number;
  hash: string;
  error: string;
  retries: number;
  flaggedAt: Date;
  nextRetryAt: Date;
}

export interface UnreadBlocksConfig {
  /** Polls in a row a block may fail before it is passed over (logReads.blockAttempts). */
  blockAttempts: number;
  /** First retry delay; doubled per failed retry, up to 64× (logReads.retrySec). */
  retrySec: number;
}

/** Retries of one block are spaced at most this many times the first delay apart. */
const MAX_BACKOFF = 64;
/** Passed-over blocks retried per reader and poll: a retry is extra work beside the cursor's step. */
const RETRIES_PER_POLL = 4;
/** Unread blocks the console and status lists show per chain. */
const LISTED = 50;

/** What the node said (viem keeps it in `details`, its message being a generic title), on one line. */
function reason(err: unknown): string {
  // What the read met, under the UnreadableBlockError that says which block.
  const e = findCause(err, (c) => !(c instanceof UnreadableBlockError)) ?? err;
  const details = (e as { details?: unknown })?.details;
  const text = typeof details === 'string' && details ? details : String((e as Error)?.message ?? e);
  return text.split('\n')[0]!.slice(0, 500);
}

/** Drops every unread block a chain's readers named `<family>:…` hold (the chain is forgotten: a dev node started anew under its id). */
export async function forgetUnreadBlocks(q: Queryable, chainId: number, family: string): Promise<void> {
  await q.query(`DELETE FROM unread_blocks WHERE chain_id = $1 AND starts_with(reader, $2)`, [chainId, `${family}:`]);
}

/** The unread blocks of every reader (of one chain, or all), oldest first: what operators are shown. */
export async function listUnreadBlocks(db: Queryable, chainId?: number): Promise<UnreadBlock[]> {
  const res = await db.query<Record<string, string | number | Date>>(
    `SELECT chain_id, reader, block_number::text AS b, block_hash, error, retries, flagged_at, next_retry_at FROM unread_blocks
      WHERE resolved_at IS NULL AND ($1::bigint IS NULL OR chain_id = $1) ORDER BY chain_id, block_number LIMIT ${LISTED}`,
    [chainId ?? null],
  );
  return res.rows.map((r) => ({
    chainId: Number(r.chain_id),
    reader: String(r.reader),
    block: Number(r.b),
    hash: String(r.block_hash),
    error: String(r.error),
    retries: Number(r.retries),
    flaggedAt: new Date(r.flagged_at),
    nextRetryAt: new Date(r.next_retry_at),
  }));
}

/**
 * What keeps one reader (a follower's scope, a watcher) from retrying one block forever: it counts
 * the polls in a row that failed on the same block; at `blockAttempts` the reader passes over it
 * (its cursor moves on) and records it with `flag`, on the transaction that moves the cursor. The
 * record is a stored row, a warning, a counter and a gauge; `retryDue` reads it again later.
 */
export class UnreadBlocks {
  private failing: { block: bigint; count: number } | null = null;
  /** When the due retries are looked up next (at most every 30 s, sooner when retrySec is shorter). */
  private nextCheck = 0;

  constructor(private readonly d: { db: Db; chain: ChainClient; reader: string; cfg: UnreadBlocksConfig; log: Logger; metrics?: Metrics }) {}

  /** Tries of one block before it is passed over (logReads.blockAttempts). */
  get attempts(): number {
    return this.d.cfg.blockAttempts;
  }

  private get labels() {
    return { chain: this.d.chain.name, reader: this.d.reader };
  }

  /**
   * Called when a poll failed: true when `err` is the `blockAttempts`-th failure in a row of one
   * block's read, so the caller should pass over it. Failures of anything else are not counted.
   */
  shouldPassOver(err: unknown): err is UnreadableBlockError {
    if (!(err instanceof UnreadableBlockError)) return false;
    this.failing = this.failing?.block === err.block ? { block: err.block, count: this.failing.count + 1 } : { block: err.block, count: 1 };
    return this.failing.count >= this.d.cfg.blockAttempts;
  }

  /** A step read its range: the count of failures in a row starts again. */
  succeeded(): void {
    this.failing = null;
  }

  /** Records the block passed over, on the caller's transaction (the one that moves its cursor past it). */
  async flag(q: Queryable, err: UnreadableBlockError, hash: string): Promise<void> {
    await q.query(
      `INSERT INTO unread_blocks (chain_id, reader, block_number, block_hash, error, next_retry_at)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6))
       ON CONFLICT (chain_id, reader, block_number) DO UPDATE SET block_hash = EXCLUDED.block_hash, error = EXCLUDED.error,
         retries = 0, flagged_at = now(), next_retry_at = EXCLUDED.next_retry_at, resolved_at = NULL`,
      [this.d.chain.chainId, this.d.reader, err.block.toString(), hash, reason(err), this.d.cfg.retrySec],
    );
  }

  /** A reorg took the reader's cursor back to `block`: what it passed over above, still unread, is read again from there. */
  async forgetAbove(q: Queryable, block: bigint): Promise<void> {
    await q.query('DELETE FROM unread_blocks WHERE chain_id = $1 AND reader = $2 AND block_number > $3 AND resolved_at IS NULL', [this.d.chain.chainId, this.d.reader, block.toString()]);
  }

  /** After the transaction that flagged the block committed: the warning and the metrics. */
  async flagged(err: UnreadableBlockError): Promise<void> {
    this.d.metrics?.logBlocksSkipped.inc(this.labels);
    this.d.log.warn(
      { ...this.labels, block: err.block.toString(), attempts: this.d.cfg.blockAttempts, err: reason(err), retrySec: this.d.cfg.retrySec },
      'block logs unreadable: passed over, flagged for a later retry',
    );
    await this.gauge();
  }

  private async gauge(): Promise<void> {
    const res = await this.d.db.query<{ n: string }>('SELECT count(*)::text AS n FROM unread_blocks WHERE chain_id = $1 AND reader = $2 AND resolved_at IS NULL', [
      this.d.chain.chainId,
      this.d.reader,
    ]);
    this.d.metrics?.logBlocksUnread.set(this.labels, Number(res.rows[0]!.n));
  }

  /**
   * Reads again the passed-over blocks whose retry is due: `read` reads one, `apply` records what it
   * found on the transaction that marks the block read. A block whose read fails again is retried
   * later, twice as late. Returns the blocks read.
   */
  async retryDue<T>(read: (block: bigint) => Promise<T>, apply: (tx: Queryable, block: bigint, found: T) => Promise<void>): Promise<number> {
    if (Date.now() < this.nextCheck) return 0;
    this.nextCheck = Date.now() + Math.min(this.d.cfg.retrySec * 1000, 30_000);
    const due = await this.d.db.query<{ b: string }>(
      `SELECT block_number::text AS b FROM unread_blocks
        WHERE chain_id = $1 AND reader = $2 AND resolved_at IS NULL AND next_retry_at <= now() ORDER BY block_number LIMIT ${RETRIES_PER_POLL}`,
      [this.d.chain.chainId, this.d.reader],
    );
    let resolved = 0;
    for (const row of due.rows) {
      const block = BigInt(row.b);
      let found: T;
      try {
        found = await read(block);
      } catch (err) {
        await this.d.db.query(
          `UPDATE unread_blocks SET retries = retries + 1, error = $4,
                  next_retry_at = now() + make_interval(secs => $5 * power(2, LEAST(retries + 1, $6)))
            WHERE chain_id = $1 AND reader = $2 AND block_number = $3 AND resolved_at IS NULL`,
          [this.d.chain.chainId, this.d.reader, row.b, reason(err), this.d.cfg.retrySec, Math.log2(MAX_BACKOFF)],
        );
        this.d.log.warn({ ...this.labels, block: row.b, err: reason(err) }, 'block logs still unreadable: retried later');
        continue;
      }
      // Marked read on the transaction that records its logs: of two processes retrying it, one records.
      const done = await this.d.db.transaction(async (tx) => {
        const mine = await tx.query('UPDATE unread_blocks SET resolved_at = now() WHERE chain_id = $1 AND reader = $2 AND block_number = $3 AND resolved_at IS NULL RETURNING 1', [
          this.d.chain.chainId,
          this.d.reader,
          row.b,
        ]);
        if (!mine.rows.length) return false;
        await apply(tx, block, found);
        return true;
      });
      if (done) {
        resolved++;
        this.d.log.info({ ...this.labels, block: row.b }, 'passed-over block read on retry');
      }
    }
    // Each look-up also sets the gauge: rows another process flagged or read count here too.
    await this.gauge();
    return resolved;
  }
}
