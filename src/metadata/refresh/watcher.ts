import { PollLoop } from '../../util/poll-loop.ts';
import { FailureStreak } from '../../util/failure-streak.ts';
import { decodeAbiParameters, parseAbiItem, toEventSelector, type Address, type Hex } from 'viem';
import type { ChainClient } from '../../chain/client.ts';
import { ReadPacer } from '../../chain/head.ts';
import { LogReader, type ChainLog, type UnreadableBlockError } from '../../chain/logs.ts';
import { UnreadBlocks } from '../../chain/unread-blocks.ts';
import type { Metrics } from '../../telemetry/metrics.ts';
import type { AppConfig, ChainConfig } from '../../config/schema.ts';
import type { Db, Queryable } from '../../store/db.ts';
import type { Logger } from '../../telemetry/logger.ts';
import type { RefreshService } from './refresh.ts';
import { taskStore } from './task-store.ts';
import { MINT_EVENTS, mintedIds } from './mint-logs.ts';
import { mintMonitorStore } from './mint-monitors.ts';

const EVENTS = [
  parseAbiItem('event MetadataUpdate(uint256 _tokenId)'),
  parseAbiItem('event BatchMetadataUpdate(uint256 _fromTokenId, uint256 _toTokenId)'),
  parseAbiItem('event URI(string value, uint256 indexed id)'),
  ...MINT_EVENTS,
] as const;
const EVENT_BY_TOPIC = new Map(EVENTS.map((e) => [toEventSelector(e), e.name]));
/** A BatchMetadataUpdate wider than this refreshes the tokens the service has seen, not the whole range. */
const MAX_RANGE = 10_000n;
const ADDRESSES_PER_QUERY = 500;

interface Cursor {
  block: bigint;
  hash: string;
}

/**
 * Follows one chain a few blocks behind its head and queues refreshes for the contracts the service
 * knows and those a project put in the mint monitor: ERC-4906 MetadataUpdate / BatchMetadataUpdate,
 * ERC-1155 URI, and new mints. In the background it steps on the heads of the chain's shared head
 * reader (chain/head.ts), at most once per pollMs, and once per idleReadMs while its reads find nothing
 * (one eth_getLogs for several blocks).
 */
export class ChainWatcher {
  private readonly loop: PollLoop;
  /** Blocks processed so far, for metrics and tests. */
  lastProcessed: bigint | null = null;
  private readonly reader: LogReader;
  /** Blocks passed over for their logs being unreadable, and their retries. */
  readonly unread: UnreadBlocks;
  private readonly pacer = new ReadPacer(() => ({ busyMs: this.d.config.watcher.pollMs, idleMs: this.d.config.watcher.idleReadMs }));
  private unsubscribe?: () => void;

  constructor(
    private readonly chain: ChainClient,
    private readonly chainConfig: ChainConfig,
    private readonly d: { db: Db; refresh: RefreshService; config: AppConfig; log: Logger; metrics?: Metrics; onEnqueued?: () => void },
  ) {
    this.loop = new PollLoop(
      () => this.tick(),
      () => this.d.config.watcher.pollMs,
      new FailureStreak(this.d.log, 'chain watcher poll', { chain: this.chain.name }, () => !this.chain.health.ok),
    );
    this.reader = new LogReader(chain, d.config.watcher.maxBlocksPerPoll, [...EVENT_BY_TOPIC.keys()]);
    this.unread = new UnreadBlocks({ db: d.db, chain, reader: 'watcher', cfg: d.config.logReads, log: d.log, metrics: d.metrics });
  }

  get chainId(): number {
    return this.chain.chainId;
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

  private async cursor(): Promise<Cursor | null> {
    const res = await this.d.db.query<{ block_number: string | number; block_hash: string }>('SELECT block_number, block_hash FROM chain_cursors WHERE chain_id = $1', [this.chain.chainId]);
    return res.rows[0] ? { block: BigInt(res.rows[0].block_number), hash: res.rows[0].block_hash } : null;
  }

  private async saveCursor(block: bigint, hash: string) {
    await this.d.db.query(
      `INSERT INTO chain_cursors (chain_id, block_number, block_hash) VALUES ($1, $2, $3)
       ON CONFLICT (chain_id) DO UPDATE SET block_number = EXCLUDED.block_number, block_hash = EXCLUDED.block_hash, updated_at = now()`,
      [this.chain.chainId, block.toString(), hash],
    );
    this.lastProcessed = block;
  }

  /** The block's hash on the chain of the head (kept by the shared reader, else read); null: the node has none there. */
  private async hashOf(block: bigint): Promise<string | null> {
    const b = await this.chain.head.block(block, this.chain.public).catch(() => null);
    return b?.hash ?? null;
  }

  /** One step at the node's head, read now. */
  async poll(): Promise<void> {
    await this.step((await this.chain.head.read()).number);
  }

  /** The background loop's step: at the shared reader's head, when its range is due. */
  private tick(): Promise<boolean> {
    return this.pacer.tick(this.chain.head, { maxAgeMs: this.d.config.watcher.pollMs, confirmations: this.d.config.watcher.confirmations }, (h) => this.step(h));
  }

  /** One step: from the cursor up to head − confirmations, at most maxBlocksPerPoll blocks; true when it stopped short. */
  private async step(head: bigint): Promise<boolean> {
    const w = this.d.config.watcher;
    const target = head - BigInt(w.confirmations);
    if (target < 0n) return false;
    let cur = await this.cursor();
    if (!cur) {
      // A new watcher starts at the head (or the configured block): history is what refresh tasks are for.
      const start = this.chainConfig.watchFromBlock !== undefined ? BigInt(this.chainConfig.watchFromBlock) - 1n : target;
      const from = start < 0n ? 0n : start;
      await this.saveCursor(from, (await this.hashOf(from)) ?? '0x');
      if (this.chainConfig.watchFromBlock === undefined) {
        this.pacer.at(from);
        return false;
      }
      cur = await this.cursor();
    }
    if (!cur) return false;
    // A reorg replaced the block we stopped at: step back and read that stretch again.
    const seen = await this.hashOf(cur.block);
    if (seen && cur.hash !== '0x' && seen !== cur.hash) {
      const back = cur.block > BigInt(w.confirmations + 10) ? cur.block - BigInt(w.confirmations + 10) : 0n;
      this.d.log.warn({ chain: this.chain.name, at: cur.block.toString(), back: back.toString() }, 'reorg noticed, re-reading');
      await this.saveCursor(back, (await this.hashOf(back)) ?? '0x');
      // What was passed over above `back` is read again from there (and passed over again if need be).
      await this.unread.forgetAbove(this.d.db, back);
      this.pacer.reset();
      return true;
    }
    await this.retryUnread();
    if (cur.block >= target) {
      this.pacer.at(cur.block);
      return false;
    }
    const from = cur.block + 1n;
    const upTo = from + BigInt(w.maxBlocksPerPoll) - 1n > target ? target : from + BigInt(w.maxBlocksPerPoll) - 1n;
    let scanned: { to: bigint; found: Map<Address, Set<string>> };
    try {
      scanned = await this.scan(from, upTo);
    } catch (err) {
      // One block no read could get: after a few polls in a row, pass over it rather than hold up the chain.
      if (this.unread.shouldPassOver(err)) {
        await this.passOver(cur, err);
        return true;
      }
      throw err;
    }
    this.unread.succeeded();
    const { to, found } = scanned;
    const toHash = (await this.hashOf(to)) ?? '0x';
    // Watchers of several processes share the cursor. The refreshes and the cursor's move are one
    // transaction that first locks the cursor and checks it is still where this scan began: of two
    // watchers that read the same blocks, one queues their refreshes and the other drops its scan.
    const queued = await this.d.db.transaction(async (tx) => {
      const now = await tx.query<{ block_number: string | number; block_hash: string }>('SELECT block_number, block_hash FROM chain_cursors WHERE chain_id = $1 FOR UPDATE', [this.chain.chainId]);
      const row = now.rows[0];
      if (!row || BigInt(row.block_number) !== cur.block || row.block_hash !== cur.hash) return null;
      const tasks = await this.enqueue(tx, found);
      await tx.query('UPDATE chain_cursors SET block_number = $2, block_hash = $3, updated_at = now() WHERE chain_id = $1', [this.chain.chainId, to.toString(), toHash]);
      return tasks;
    });
    if (!queued) return false;
    this.lastProcessed = to;
    this.pacer.read(to, found.size > 0, to >= target);
    for (const q of queued) this.d.log.info({ chain: this.chain.name, ...q }, 'refresh queued from chain events');
    if (queued.length) this.d.onEnqueued?.();
    return to < target;
  }

  /** Queues the refreshes found, on the caller's transaction. */
  private async enqueue(tx: Queryable, found: Map<Address, Set<string>>): Promise<Array<{ contract: Address; tokens: number; taskId: number }>> {
    const refresh = this.d.refresh.withTasks(taskStore(tx));
    const tasks: Array<{ contract: Address; tokens: number; taskId: number }> = [];
    for (const [contract, ids] of found) {
      const { taskId } = await refresh.enqueueTokens(null, this.chain, contract, [...ids], { source: 'watcher' });
      tasks.push({ contract, tokens: ids.size, taskId });
    }
    return tasks;
  }

  /**
   * Moves the cursor past a block whose logs could not be read, recording it (unread_blocks) on the
   * same transaction: its refreshes are queued when a retry reads it (retryUnread).
   */
  private async passOver(cur: Cursor, err: UnreadableBlockError): Promise<void> {
    const hash = (await this.hashOf(err.block)) ?? '0x';
    const moved = await this.d.db.transaction(async (tx) => {
      const now = await tx.query<{ block_number: string | number; block_hash: string }>('SELECT block_number, block_hash FROM chain_cursors WHERE chain_id = $1 FOR UPDATE', [this.chain.chainId]);
      const row = now.rows[0];
      if (!row || BigInt(row.block_number) !== cur.block || row.block_hash !== cur.hash || err.block !== cur.block + 1n) return false;
      await this.unread.flag(tx, err, hash);
      await tx.query('UPDATE chain_cursors SET block_number = $2, block_hash = $3, updated_at = now() WHERE chain_id = $1', [this.chain.chainId, err.block.toString(), hash]);
      return true;
    });
    if (!moved) return;
    this.lastProcessed = err.block;
    await this.unread.flagged(err);
  }

  /** Reads again the blocks passed over whose retry is due and queues their refreshes. */
  private async retryUnread(): Promise<void> {
    let queued = false;
    await this.unread.retryDue(
      async (block) => {
        const contracts = await this.knownContracts();
        const logs: ChainLog[] = [];
        for (let i = 0; i < contracts.length; i += ADDRESSES_PER_QUERY) logs.push(...(await this.reader.readBlock(block, contracts.slice(i, i + ADDRESSES_PER_QUERY))));
        return this.collect(logs);
      },
      async (tx, _block, found) => {
        queued = (await this.enqueue(tx, found)).length > 0 || queued;
      },
    );
    if (queued) this.d.onEnqueued?.();
  }

  /** The contracts read: token contracts the service met, and monitored ones it may not have met yet. */
  private async knownContracts(): Promise<Address[]> {
    const [res, monitored] = await Promise.all([
      this.d.db.query<{ address: string }>(`SELECT address FROM contracts WHERE chain_id = $1 AND type IN ('ERC721', 'ERC1155')`, [this.chain.chainId]),
      mintMonitorStore(this.d.db).addresses(this.chain.chainId),
    ]);
    return [...new Set([...res.rows.map((r) => r.address as Address), ...monitored])];
  }

  private async knownTokens(contract: Address): Promise<string[]> {
    const res = await this.d.db.query<{ token_id: string }>('SELECT token_id FROM token_metadata WHERE chain_id = $1 AND contract_address = $2', [this.chain.chainId, contract]);
    return res.rows.map((r) => r.token_id);
  }

  /**
   * The tokens to refresh, per contract, for the events in blocks [from, to'], to' ≤ to as far as
   * the node answered (the reader shrinks its span when refused).
   */
  private async scan(fromBlock: bigint, toBlock: bigint): Promise<{ to: bigint; found: Map<Address, Set<string>> }> {
    const contracts = await this.knownContracts();
    let to = toBlock;
    const logs: ChainLog[] = [];
    for (let i = 0; i < contracts.length; i += ADDRESSES_PER_QUERY) {
      const got = await this.reader.read(fromBlock, to, contracts.slice(i, i + ADDRESSES_PER_QUERY));
      to = got.to;
      logs.push(...got.logs);
    }
    // An earlier group of contracts may have been read further than a later one reached.
    return { to, found: await this.collect(logs.filter((l) => l.blockNumber <= to)) };
  }

  /** The tokens to refresh, per contract, for these logs. */
  private async collect(logs: ChainLog[]): Promise<Map<Address, Set<string>>> {
    const perContract = new Map<Address, Set<string>>();
    const add = (c: Address, ids: string[]) => {
      const set = perContract.get(c) ?? new Set<string>();
      for (const id of ids) set.add(id);
      perContract.set(c, set);
    };
    for (const log of logs) {
      const c = log.address.toLowerCase() as Address;
      const topics = log.topics as Hex[];
      const eventName = EVENT_BY_TOPIC.get(topics[0]?.toLowerCase() as Hex);
      try {
        switch (eventName) {
          case 'MetadataUpdate':
            add(c, [BigInt(decodeAbiParameters([{ type: 'uint256' }], log.data)[0]).toString()]);
            break;
          case 'BatchMetadataUpdate': {
            const [lo, hi] = decodeAbiParameters([{ type: 'uint256' }, { type: 'uint256' }], log.data);
            if (hi >= lo && hi - lo < MAX_RANGE)
              add(
                c,
                Array.from({ length: Number(hi - lo + 1n) }, (_, k) => (lo + BigInt(k)).toString()),
              );
            else add(c, await this.knownTokens(c));
            break;
          }
          case 'URI':
            if (topics[1]) add(c, [BigInt(topics[1]).toString()]);
            break;
          default:
            add(c, mintedIds({ eventName, topics, data: log.data }));
        }
      } catch {
        /* a log that does not decode as the standard says is not ours to act on */
      }
    }
    for (const [contract, ids] of perContract) if (!ids.size) perContract.delete(contract);
    return perContract;
  }
}
