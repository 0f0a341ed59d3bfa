import { PollLoop } from '../util/poll-loop.ts';
import { FailureStreak } from '../util/failure-streak.ts';
import type { ChainClient } from '../chain/client.ts';
import type { Hex } from 'viem';
import type { Db, Queryable } from '../store/db.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { ReadPacer } from '../chain/head.ts';
import { LogReader, UnreadableBlockError } from '../chain/logs.ts';
import { UnreadBlocks, type UnreadBlocksConfig } from '../chain/unread-blocks.ts';
import { decodeChunk, type DecodedChunk } from './chunk.ts';
import { TRANSFER_TOPICS, type RawLog } from './decode.ts';
import { applyTransfers, contractTypesOf, rollbackAbove, type IndexHooks, type LogWants, type TimedLog } from './transfer-store.ts';
import type { IndexScope } from './watchlist.ts';

export interface FollowerConfig {
  scope: IndexScope;
  /** First block indexed when the chain has no cursor yet (default: the confirmed head at first start). */
  fromBlock?: number;
  confirmations: number;
  chunkBlocks: number;
  /** How often the background loop looks at the shared head when no new one woke it (new heads wake it at once). */
  pollMs: number;
  /** While its reads find no transfers, one read per this long (several blocks per eth_getLogs); default 0: every new head. */
  idleReadMs?: number;
  /** Recent block hashes kept to find where a reorg forked. */
  reorgWindow: number;
  /** When a block's logs cannot be read, how often before passing over it, and when to retry (logReads). */
  logReads: UnreadBlocksConfig;
}

export interface Cursor {
  block: bigint;
  hash: string;
  malformed: number;
  updatedAt: Date;
}

export async function readCursor(db: Db, chainId: number, scope: IndexScope): Promise<Cursor | null> {
  const res = await db.query<{ b: string; block_hash: string; m: string; updated_at: Date | string }>(
    'SELECT block_number::text AS b, block_hash, malformed::text AS m, updated_at FROM indexer_cursors WHERE chain_id = $1 AND scope = $2',
    [chainId, scope],
  );
  const r = res.rows[0];
  return r ? { block: BigInt(r.b), hash: r.block_hash, malformed: Number(r.m), updatedAt: new Date(r.updated_at) } : null;
}

/**
 * Follows one chain `confirmations` blocks behind its head and applies its token transfers. In the
 * background it steps on the heads the chain's shared head reader (chain/head.ts) hands it, reading the
 * block hashes it checks from the headers that reader keeps; while its reads find nothing, it reads
 * once per `idleReadMs` (one eth_getLogs for several blocks). `poll()` steps once at the node's head. Each
 * step's transfers, the recent block hashes and the cursor's move are one transaction that first
 * locks the cursor and checks it is where the step began: of two followers on one chain (two
 * processes), one applies a range and the other drops its read. A cursor block whose hash changed
 * is a reorg: the transfers above the last block both forks share are undone and read again.
 */
export class IndexFollower {
  private readonly loop: PollLoop;
  private readonly reader: LogReader;
  /** Blocks this scope's follower passed over for their logs being unreadable, and their retries. */
  readonly unread: UnreadBlocks;
  /** Readers of the other logs listeners want, by topic set (each keeps the span its node allows). */
  private readonly otherReaders = new Map<string, LogReader>();
  private readonly pacer = new ReadPacer(() => ({ busyMs: 0, idleMs: this.cfg.idleReadMs ?? 0 }));
  private unsubscribe?: () => void;

  constructor(
    readonly chain: ChainClient,
    private readonly cfg: FollowerConfig,
    private readonly d: { db: Db; log: Logger; metrics?: Metrics; addresses?: () => Promise<string[]>; hooks?: IndexHooks },
  ) {
    this.loop = new PollLoop(
      () => this.tick(),
      () => this.cfg.pollMs,
      new FailureStreak(this.d.log, 'indexer poll', { chain: this.chain.name }, () => !this.chain.health.ok),
    );
    this.reader = new LogReader(chain, cfg.chunkBlocks, TRANSFER_TOPICS);
    this.unread = new UnreadBlocks({ db: d.db, chain, reader: `indexer:${cfg.scope}`, cfg: cfg.logReads, log: d.log, metrics: d.metrics });
  }

  get scope(): IndexScope {
    return this.cfg.scope;
  }

  /** Started in this process (an API process may leave following to `metarelay worker`). */
  get active(): boolean {
    return this.loop.active;
  }

  start(): void {
    // Each new head of the shared reader wakes the loop; the reader polls while someone listens.
    this.unsubscribe ??= this.chain.head.subscribe(() => this.loop.wake());
    this.loop.start();
  }

  stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = undefined;
    return this.loop.stop();
  }

  /** The block's hash on the chain of the head (kept by the shared reader, else read); null: the node has none there. */
  private async hashOf(block: bigint): Promise<string | null> {
    if (block < 0n) return '0x';
    const b = await this.chain.head.block(block, this.chain.public).catch(() => null);
    return b?.hash ?? null;
  }

  /** One step at the node's head, read now; true when there is more to read right away. */
  async poll(): Promise<boolean> {
    return this.step((await this.chain.head.read()).number);
  }

  /** The background loop's step: at the shared reader's head, when its range is due. */
  private tick(): Promise<boolean> {
    return this.pacer.tick(this.chain.head, { maxAgeMs: this.cfg.pollMs, confirmations: this.cfg.confirmations }, (h) => this.step(h));
  }

  /** One step with the head at `head`; true when there is more to read right away. */
  private async step(head: bigint): Promise<boolean> {
    const { db } = this.d;
    const chainId = this.chain.chainId;
    const target = head - BigInt(this.cfg.confirmations);
    if (target < 0n) return false;
    let cur = await readCursor(db, chainId, this.cfg.scope);
    if (!cur) {
      const start = this.cfg.fromBlock !== undefined ? BigInt(this.cfg.fromBlock) - 1n : target;
      const hash = (await this.hashOf(start)) ?? '0x';
      await db.query(`INSERT INTO indexer_cursors (chain_id, scope, block_number, block_hash) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, [chainId, this.cfg.scope, start.toString(), hash]);
      cur = await readCursor(db, chainId, this.cfg.scope);
      if (!cur) return false;
    }
    // A reorg only when the node returns the cursor's block with another hash. A head below the cursor
    // or no block at its height is a node behind (load-balanced providers answer from nodes a block or
    // two apart): looked at again, never unwound on; a chain that really got shorter grows back past
    // the cursor with another block there.
    const seen = await this.hashOf(cur.block);
    if (seen && cur.hash !== '0x' && seen !== cur.hash) {
      await this.unwind(cur);
      return true;
    }
    if (cur.block > head || (!seen && cur.hash !== '0x')) {
      this.pacer.retry();
      return false;
    }
    await this.retryUnread();
    if (cur.block >= target) {
      this.pacer.at(cur.block);
      return false;
    }
    const from = cur.block + 1n;
    const address = this.d.addresses ? await this.d.addresses() : undefined;
    const wants = this.d.hooks?.logWants ? await this.d.hooks.logWants(db, chainId) : null;
    /** Below a block the other logs' read could not get: the range ends before it, for it to be passed over first. */
    let below = target;
    for (;;) {
      const end = from + BigInt(this.reader.currentSpan) - 1n;
      const planned = end < below ? end : below;
      // The end block's hash is read before its logs: if a reorg lands in between, the next step
      // sees the cursor's hash gone from the chain and reads the range again.
      const endHash = await this.hashOf(planned);
      if (!endHash) {
        this.pacer.retry();
        return false;
      }
      let read: { to: bigint; logs: RawLog[] };
      let others: RawLog[] = [];
      try {
        read = await this.reader.read(from, planned, address);
        if (read.to === planned && wants) others = await this.readOthers(wants, from, planned, address);
      } catch (err) {
        // A block the other logs' read cannot get, past the first: the range stops short of it, and the
        // next step starts there (and passes over it if it must).
        if (err instanceof UnreadableBlockError && err.block > from && err.block <= planned) {
          below = err.block - 1n;
          continue;
        }
        // One block no read could get: after a few polls in a row, pass over it rather than hold up the chain.
        if (this.unread.shouldPassOver(err)) return this.passOver(cur, err, target);
        throw err;
      }
      this.unread.succeeded();
      const { to, logs } = read;
      if (to !== planned) continue; // the node refused the span: plan again with the smaller one
      const chunk = await decodeChunk(this.chain, logs, others);
      // A log of the end block from another fork than its header: the chain moved under us.
      const logged = chunk.blockHashes.get(to);
      if (logged && logged !== endHash) {
        // The header may be one the shared head kept from before the move: read from the node next time.
        this.chain.head.distrust(to);
        return true;
      }
      const moved = await db.transaction(async (tx) => {
        const now = await tx.query<{ b: string; block_hash: string }>('SELECT block_number::text AS b, block_hash FROM indexer_cursors WHERE chain_id = $1 AND scope = $2 FOR UPDATE', [
          chainId,
          this.cfg.scope,
        ]);
        const row = now.rows[0];
        if (!row || BigInt(row.b) !== cur.block || row.block_hash !== cur.hash) return false;
        await applyTransfers(tx, chainId, chunk.entries, this.d.hooks, await this.timed(tx, chunk));
        const blocks = new Map(chunk.blockHashes);
        blocks.set(to, endHash);
        // Only blocks within the reorg window are worth remembering.
        const keepFrom = target - BigInt(this.cfg.reorgWindow);
        const recent = [...blocks].filter(([n]) => n > keepFrom);
        if (recent.length) {
          await tx.query(
            `INSERT INTO indexer_blocks (chain_id, block_number, block_hash) SELECT $1, * FROM unnest($2::bigint[], $3::text[])
             ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = EXCLUDED.block_hash`,
            [chainId, recent.map(([n]) => n.toString()), recent.map(([, h]) => h)],
          );
        }
        await tx.query('DELETE FROM indexer_blocks WHERE chain_id = $1 AND block_number <= $2', [chainId, keepFrom.toString()]);
        await tx.query(
          `UPDATE indexer_cursors SET block_number = $3, block_hash = $4, malformed = malformed + $5, updated_at = now()
            WHERE chain_id = $1 AND scope = $2`,
          [chainId, this.cfg.scope, to.toString(), endHash, chunk.malformed],
        );
        return true;
      });
      if (moved) {
        this.pacer.read(to, chunk.logs > 0, to >= target);
        this.d.metrics?.indexerLogs.inc({ chain: this.chain.name, outcome: 'applied' }, chunk.logs - chunk.malformed);
        if (chunk.malformed) this.d.metrics?.indexerLogs.inc({ chain: this.chain.name, outcome: 'malformed' }, chunk.malformed);
      }
      if (moved && chunk.malformed) {
        this.d.log.warn({ chain: this.chain.name, malformed: chunk.malformed, from: from.toString(), to: to.toString() }, 'malformed transfer logs skipped');
      }
      return moved && to < target;
    }
  }

  /**
   * Moves the cursor past a block whose logs could not be read, recording it (unread_blocks) on the
   * same transaction: its transfers are applied when a retry reads it (retryUnread).
   */
  private async passOver(cur: Cursor, err: UnreadableBlockError, target: bigint): Promise<boolean> {
    const chainId = this.chain.chainId;
    const hash = await this.hashOf(err.block);
    if (!hash) return false;
    const moved = await this.d.db.transaction(async (tx) => {
      const now = await tx.query<{ b: string; block_hash: string }>('SELECT block_number::text AS b, block_hash FROM indexer_cursors WHERE chain_id = $1 AND scope = $2 FOR UPDATE', [
        chainId,
        this.cfg.scope,
      ]);
      const row = now.rows[0];
      if (!row || BigInt(row.b) !== cur.block || row.block_hash !== cur.hash || err.block !== cur.block + 1n) return false;
      await this.unread.flag(tx, err, hash);
      await tx.query(
        `INSERT INTO indexer_blocks (chain_id, block_number, block_hash) VALUES ($1, $2, $3)
         ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = EXCLUDED.block_hash`,
        [chainId, err.block.toString(), hash],
      );
      await tx.query('UPDATE indexer_cursors SET block_number = $3, block_hash = $4, updated_at = now() WHERE chain_id = $1 AND scope = $2', [chainId, this.cfg.scope, err.block.toString(), hash]);
      return true;
    });
    if (moved) await this.unread.flagged(err);
    return moved && err.block < target;
  }

  /**
   * Every log of blocks [from, to] the wiring wants besides transfers (IndexHooks.logWants): all logs of
   * the contracts listeners name, and the logs of the events they name on any contract (on a watchlist
   * chain, `address`: the watched ones only). Transfer logs are left out: they are read and told as
   * transfers. Throws UnreadableBlockError as the transfer read does.
   */
  private async readOthers(wants: LogWants, from: bigint, to: bigint, address: readonly string[] | undefined): Promise<RawLog[]> {
    const watched = address && new Set(address);
    const reads: Array<{ topics: Hex[]; address?: readonly string[] }> = [];
    const contracts = watched ? wants.contracts.filter((c) => watched.has(c)) : wants.contracts;
    if (contracts.length) reads.push({ topics: [], address: contracts });
    if (wants.topics.length && (!address || address.length)) reads.push({ topics: wants.topics as Hex[], address });
    const seen = new Set<string>();
    const out: RawLog[] = [];
    for (const r of reads) {
      const key = r.topics.join(',');
      let reader = this.otherReaders.get(key);
      if (!reader) {
        if (this.otherReaders.size > 16) this.otherReaders.clear();
        reader = new LogReader(this.chain, this.cfg.chunkBlocks, r.topics);
        this.otherReaders.set(key, reader);
      }
      for (let at = from; at <= to; ) {
        const got = await reader.read(at, to, r.address);
        for (const l of got.logs) {
          const k = `${l.blockHash}:${l.logIndex}`;
          if (TRANSFER_TOPICS.includes(l.topics[0]?.toLowerCase() as Hex) || seen.has(k)) continue;
          seen.add(k);
          out.push(l);
        }
        at = got.to + 1n;
      }
    }
    return out.sort((a, b) => (a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1));
  }

  /** The other logs as the wiring is told them: addresses lower-cased, with what the index knows of their contracts' types. */
  private async timed(q: Queryable, chunk: DecodedChunk): Promise<TimedLog[]> {
    const logs = chunk.others;
    if (logs.length === 0) return [];
    // The chunk's own transfers say the type of a contract the index has not seen before.
    const seen = new Map(chunk.entries.map((e) => [e.contract, e.type as string]));
    const unseen = [...new Set(logs.map((l) => l.address.toLowerCase()))].filter((c) => !seen.has(c));
    const types = new Map([...(await contractTypesOf(q, this.chain.chainId, unseen)), ...seen]);
    return logs.map((l) => ({
      blockNumber: l.blockNumber,
      blockHash: l.blockHash.toLowerCase(),
      txHash: l.transactionHash.toLowerCase(),
      txIndex: l.transactionIndex,
      logIndex: l.logIndex,
      contract: l.address.toLowerCase(),
      contractType: types.get(l.address.toLowerCase()) ?? 'UNKNOWN',
      ts: l.ts,
      topics: l.topics,
      data: l.data,
    }));
  }

  /** Reads again the blocks passed over whose retry is due and applies their transfers (and tells their other logs). */
  private async retryUnread(): Promise<void> {
    await this.unread.retryDue(
      async (block) => {
        const address = this.d.addresses ? await this.d.addresses() : undefined;
        const wants = this.d.hooks?.logWants ? await this.d.hooks.logWants(this.d.db, this.chain.chainId) : null;
        return decodeChunk(this.chain, await this.reader.readBlock(block, address), wants ? await this.readOthers(wants, block, block, address) : []);
      },
      async (tx, _block, chunk) => {
        await applyTransfers(tx, this.chain.chainId, chunk.entries, this.d.hooks, await this.timed(tx, chunk));
        this.d.metrics?.indexerLogs.inc({ chain: this.chain.name, outcome: 'applied' }, chunk.logs - chunk.malformed);
      },
    );
  }

  /** The cursor's block left the chain: undo down to the last remembered block still on it. */
  private async unwind(cur: Cursor): Promise<void> {
    const { db } = this.d;
    const chainId = this.chain.chainId;
    const known = await db.query<{ b: string; block_hash: string }>(
      'SELECT block_number::text AS b, block_hash FROM indexer_blocks WHERE chain_id = $1 AND block_number <= $2 ORDER BY block_number DESC LIMIT $3',
      [chainId, cur.block.toString(), this.cfg.reorgWindow],
    );
    let ancestor: bigint | null = null;
    let ancestorHash = '0x';
    const hashes = await Promise.all(known.rows.map((r) => this.hashOf(BigInt(r.b))));
    for (const [i, r] of known.rows.entries()) {
      // A block the node did not return says nothing: unwinding past it could undo blocks still on the chain.
      if (hashes[i] === null) return;
      if (hashes[i] === r.block_hash) {
        ancestor = BigInt(r.b);
        ancestorHash = r.block_hash;
        break;
      }
    }
    if (ancestor === null) {
      // Deeper than anything remembered: go back to below the oldest remembered block.
      const oldest = known.rows.length ? BigInt(known.rows[known.rows.length - 1]!.b) - 1n : cur.block - BigInt(this.cfg.reorgWindow);
      ancestor = oldest < -1n ? -1n : oldest;
      ancestorHash = (await this.hashOf(ancestor)) ?? '0x';
    }
    const undone = await db.transaction(async (tx) => {
      const now = await tx.query<{ b: string; block_hash: string }>('SELECT block_number::text AS b, block_hash FROM indexer_cursors WHERE chain_id = $1 AND scope = $2 FOR UPDATE', [
        chainId,
        this.cfg.scope,
      ]);
      const row = now.rows[0];
      if (!row || BigInt(row.b) !== cur.block || row.block_hash !== cur.hash) return null;
      const n = await rollbackAbove(tx, chainId, ancestor, ancestorHash, this.d.hooks);
      // Blocks passed over above the fork are read again by the cursor (and passed over again if need be).
      await this.unread.forgetAbove(tx, ancestor);
      await tx.query('UPDATE indexer_cursors SET block_number = $3, block_hash = $4, updated_at = now() WHERE chain_id = $1 AND scope = $2', [
        chainId,
        this.cfg.scope,
        ancestor.toString(),
        ancestorHash,
      ]);
      return n;
    });
    if (undone !== null) {
      this.pacer.reset();
      this.d.metrics?.indexerReorgs.inc({ chain: this.chain.name });
      this.d.log.warn({ chain: this.chain.name, from: cur.block.toString(), to: ancestor.toString(), undone }, 'reorg: transfers rolled back');
    }
  }
}
