import type { Hex, PublicClient } from 'viem';
import type { Logger } from '../telemetry/logger.ts';
import { LruCache } from '../util/lru.ts';
import type { ChainHealth } from './health.ts';

/** What the readers of new blocks need of a block: where it is and which one it is. */
export interface BlockHeader {
  number: bigint;
  /** Lower case, as every reader compares it. */
  hash: Hex;
  parentHash: Hex;
  timestamp: bigint;
  /** The block's base fee; null on a chain without EIP-1559. */
  baseFeePerGas: bigint | null;
}

interface WireHeader {
  number: Hex | null;
  hash: Hex | null;
  parentHash: Hex;
  timestamp: Hex;
  baseFeePerGas?: Hex | null;
}

/** Without a configured block time: the one learned from the heads, kept within these bounds (a chain that mines on demand has no block time to learn). */
const LEARNED_MIN_MS = 1_000;
const LEARNED_MAX_MS = 2_000;
/** Heights of the chain of the head kept (header by height): what the readers ask for is within their confirmations of it. */
const KEPT = 256;
/** Headers kept by hash (never stale: a hash names one block), for an hour at most. */
const BY_HASH = 1_024;
const BY_HASH_TTL_MS = 3_600_000;
/**
 * Parents read by hash to join a new head to the heights kept, while the head polls for its readers (who
 * use the kept heights); a longer gap or deeper fork starts them afresh from the head. Without readers
 * (a dispatcher alone, reading every 2 s) nothing is read to join: the heights start afresh instead.
 */
const MAX_WALK = 3;
/** Reads in a row below the head before the chain is taken to have gone back: one read may be a node behind (load-balanced providers). */
const LOWER_TO_ACCEPT = 3;
/** Heights the block time is learned over. */
const LEARN_SPAN = 32n;

const hex = (n: bigint) => `0x${n.toString(16)}`;

function toHeader(b: WireHeader | null | undefined): BlockHeader | null {
  if (!b?.number || !b.hash) return null;
  return {
    number: BigInt(b.number),
    hash: b.hash.toLowerCase() as Hex,
    parentHash: b.parentHash.toLowerCase() as Hex,
    timestamp: BigInt(b.timestamp),
    baseFeePerGas: b.baseFeePerGas ? BigInt(b.baseFeePerGas) : null,
  };
}

export interface ChainHeadOptions {
  /** The chain's block time (chains[].blockTimeMs): the poll interval. Unset: learned from the blocks' timestamps, 1–2 s. */
  blockTimeMs?: number;
  /** Told the head at each read, for /ready and the console. */
  health?: ChainHealth;
  log?: Logger;
  name?: string;
}

/**
 * The head of one chain, read once per block time for every reader of the process (the relayer's
 * dispatcher, the chain watcher, the indexer follower) instead of once per reader and poll, and the
 * headers of the recent blocks of its chain, so a reader that checks a block's hash (a reorg) does not
 * ask the node again for a block the head already brought.
 *
 * Consistency. The heights kept form one chain: each one's parent hash is the hash kept one below, up
 * to the head. A new head joins it only by its parent hash (read by hash when a block or two were
 * missed); a head on another fork replaces the heights above the fork, and one that cannot be joined
 * (a deep fork, a long gap) starts the heights afresh from itself. So a height is served from here only
 * while it is an ancestor of the newest head read, and a reader comparing a stored hash with it sees a
 * reorg exactly when the node's chain of that head no longer has the stored block.
 * A head below the one held is a node behind (load-balanced providers answer from nodes a block or two
 * apart): ignored, unless read so several times in a row (a chain that really went back: a deep reorg,
 * a node restarted on less). A block the node does not return is null, never cached: "look again".
 */
export class ChainHead {
  private top: BlockHeader | undefined;
  /** When the newest read the node answered was sent. */
  private readAt = 0;
  /** When the last read was sent, answered or not. */
  private triedAt = 0;
  /** When the loop reads next: a grid one interval apart, so late timers do not drift it. */
  private nextAt = 0;
  /** The loop's reads in a row that brought no new head. */
  private misses = 0;
  /** Reads in a row below the head. */
  private lower = 0;
  private readonly kept = new Map<bigint, BlockHeader>();
  private lo = 0n;
  private readonly byHash = new LruCache<BlockHeader>(BY_HASH, BY_HASH_TTL_MS);
  private reading?: { at: number; promise: Promise<BlockHeader> };
  private readonly fetching = new Map<bigint, Promise<BlockHeader | null>>();
  /** New heads are taken one at a time (joining one may read parents). */
  private serial: Promise<unknown> = Promise.resolve();
  private readonly subscribers = new Set<(head: BlockHeader) => void>();
  private readonly backListeners = new Set<(head: BlockHeader) => void>();
  private loop?: Promise<void>;
  private wakeLoop?: () => void;
  private stopped = false;

  constructor(
    private readonly client: PublicClient,
    private readonly opts: ChainHeadOptions = {},
  ) {}

  /** The newest head read (undefined before the first). */
  get current(): BlockHeader | undefined {
    return this.top;
  }

  /** It reads the head on its own, once per interval (someone subscribed). */
  get polling(): boolean {
    return this.subscribers.size > 0 && !this.stopped;
  }

  /** How often the head is read while polling: the configured block time, else the learned one within 1–2 s. */
  get intervalMs(): number {
    if (this.opts.blockTimeMs) return this.opts.blockTimeMs;
    const learned = this.learnedBlockTimeMs() ?? LEARNED_MIN_MS;
    return Math.min(LEARNED_MAX_MS, Math.max(LEARNED_MIN_MS, learned));
  }

  /** Milliseconds per block over the recent heights kept (timestamps are whole seconds: averaged), undefined until two are. */
  learnedBlockTimeMs(): number | undefined {
    const top = this.top;
    if (!top) return undefined;
    const from = top.number - LEARN_SPAN > this.lo ? top.number - LEARN_SPAN : this.lo;
    const base = this.kept.get(from);
    if (!base || from >= top.number) return undefined;
    const ms = Number(((top.timestamp - base.timestamp) * 1000n) / (top.number - from));
    return ms < 0 ? 0 : ms;
  }

  /**
   * A head read at most `maxAgeMs` ago (0: read now). A read in flight that was sent within
   * `maxAgeMs` is shared. Throws when the node cannot be read.
   */
  read(maxAgeMs = 0): Promise<BlockHeader> {
    const now = Date.now();
    // 0 is a read now even within the millisecond of the last (a node a hop away answers in less): the
    // clock's grain must not turn it into the head held.
    const recent = (at: number) => maxAgeMs > 0 && now - at <= maxAgeMs;
    if (this.top && recent(this.readAt)) return Promise.resolve(this.top);
    const inFlight = this.reading;
    if (inFlight && recent(inFlight.at)) return inFlight.promise;
    const at = Date.now();
    const promise = this.readLatest(at);
    this.reading = { at, promise };
    promise
      .finally(() => {
        if (this.reading?.promise === promise) this.reading = undefined;
      })
      .catch(() => undefined);
    return promise;
  }

  /** The head's number, read as `read(maxAgeMs)` does: what a reader that only needs the height asks (never the node directly, so a node behind is ignored here too). */
  async number(maxAgeMs = 0): Promise<bigint> {
    return (await this.read(maxAgeMs)).number;
  }

  /**
   * The node asked for its height directly (eth_blockNumber through `via`, the caller's client), not
   * taken as the head: the readiness probe, which is about the node answering, not about the chain.
   */
  async probe(via: PublicClient = this.client): Promise<bigint> {
    const n = await via.getBlockNumber();
    this.opts.health?.sawHead(n);
    return n;
  }

  /**
   * For a reader that follows the head: while the head polls on its own, whatever it read last (it is
   * at most about one interval old); otherwise one read at most `maxAgeMs` ago, and never more often
   * than the configured block time (no new head can come sooner).
   */
  latest(maxAgeMs: number): Promise<BlockHeader> {
    return this.read(this.polling ? Math.max(maxAgeMs, 2 * this.intervalMs + 500) : Math.max(maxAgeMs, this.opts.blockTimeMs ?? 0));
  }

  /**
   * The header at height `n` on the chain of the head: kept, or read from the node (through `via`, the
   * caller's own client, so its calls batch with the caller's). Null when the node has no block there
   * (a node behind): never a reorg. Throws when the node cannot be read.
   */
  async block(n: bigint, via: PublicClient = this.client): Promise<BlockHeader | null> {
    const kept = this.kept.get(n);
    if (kept) return kept;
    const pending = this.fetching.get(n);
    if (pending) return pending;
    const promise = (async () => {
      const b = toHeader((await via.request({ method: 'eth_getBlockByNumber', params: [hex(n), false] } as never)) as WireHeader | null);
      if (b) {
        this.byHash.set(b.hash, b);
        // The height just below those kept, and their lowest one's parent: it joins them.
        if (this.kept.size && b.number === this.lo - 1n && this.kept.get(this.lo)?.parentHash === b.hash && this.kept.size < KEPT) {
          this.kept.set(b.number, b);
          this.lo = b.number;
        }
      }
      return b;
    })();
    this.fetching.set(n, promise);
    try {
      return await promise;
    } finally {
      this.fetching.delete(n);
    }
  }

  /**
   * A reader found the node's chain at odds with the kept header at height `n` (a log of that block
   * from another fork): the heights from `n` up are dropped, so they are read from the node again,
   * until a new head joins them anew.
   */
  distrust(n: bigint): void {
    if (!this.top) return;
    if (n <= this.lo) this.kept.clear();
    else for (let k = this.top.number; k >= n; k--) this.kept.delete(k);
  }

  /** `fn` is called with each new head (another number or hash); the head polls while anyone is subscribed. Returns the unsubscribe. */
  subscribe(fn: (head: BlockHeader) => void): () => void {
    this.subscribers.add(fn);
    if (!this.loop && !this.stopped) this.loop = this.run();
    return () => {
      this.subscribers.delete(fn);
      if (!this.subscribers.size) this.wakeLoop?.();
    };
  }

  /**
   * `fn` is told of each lower head taken (the chain really went back: read so several times in a row),
   * for a reader that keeps the newest block seen: blocks above it are gone. Does not make the head poll.
   */
  onWentBack(fn: (head: BlockHeader) => void): () => void {
    this.backListeners.add(fn);
    return () => this.backListeners.delete(fn);
  }

  /** Stops polling for good (the process is closing). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeLoop?.();
    await this.loop;
  }

  private async readLatest(at: number): Promise<BlockHeader> {
    this.triedAt = Math.max(this.triedAt, at);
    const got = toHeader((await this.client.request({ method: 'eth_getBlockByNumber', params: ['latest', false] } as never)) as WireHeader | null);
    if (!got) throw new Error(`chain ${this.opts.name ?? ''}: the node returned no latest block`);
    const next = this.serial.then(async () => {
      await this.accept(got);
      this.readAt = Math.max(this.readAt, at);
      this.opts.health?.sawHead(this.top!.number);
      return this.top!;
    });
    this.serial = next.catch(() => undefined);
    return next;
  }

  /** Takes a header read as `latest`: the new head, joined to the heights kept; or a node behind, ignored. */
  private async accept(h: BlockHeader): Promise<void> {
    this.byHash.set(h.hash, h);
    const top = this.top;
    if (!top) return this.restart([h]);
    if (h.hash === top.hash) {
      this.lower = 0;
      return;
    }
    if (h.number < top.number && ++this.lower < LOWER_TO_ACCEPT) return;
    this.lower = 0;
    const maxWalk = this.polling ? MAX_WALK : 0;
    // Too far above what is kept to join it by reading parents: start afresh from the head.
    if (h.number - top.number - 1n > BigInt(maxWalk)) return this.restart([h]);
    const walked = [h];
    let c = h;
    for (let steps = 0; ; steps++) {
      const below = c.number - 1n;
      if (this.kept.get(below)?.hash === c.parentHash) return this.join(below, walked);
      if (c.number <= 0n || below < this.lo || steps >= maxWalk) return this.restart(walked);
      const parent = await this.parent(c);
      // A parent the node does not return says nothing of the heights kept: they are dropped, not compared.
      if (!parent || parent.number !== below) return this.restart(walked);
      walked.push(parent);
      c = parent;
    }
  }

  private async parent(c: BlockHeader): Promise<BlockHeader | null> {
    const cached = this.byHash.get(c.parentHash);
    if (cached) return cached;
    const b = toHeader((await this.client.request({ method: 'eth_getBlockByHash', params: [c.parentHash, false] } as never)) as WireHeader | null);
    if (b) this.byHash.set(b.hash, b);
    return b;
  }

  /** `walked` (the new head first, then its parents) sits on the height `at` kept: the heights above it are replaced. */
  private join(at: bigint, walked: BlockHeader[]): void {
    for (let n = this.top!.number; n > at; n--) this.kept.delete(n);
    for (const b of walked) this.kept.set(b.number, b);
    while (this.kept.size > KEPT) this.kept.delete(this.lo++);
    this.setTop(walked[0]!);
  }

  /** The heights kept start again from `walked` (the new head first, then the parents read). */
  private restart(walked: BlockHeader[]): void {
    this.kept.clear();
    for (const b of walked) this.kept.set(b.number, b);
    this.lo = walked[walked.length - 1]!.number;
    this.lower = 0;
    this.setTop(walked[0]!);
  }

  private setTop(h: BlockHeader): void {
    const changed = this.top?.hash !== h.hash;
    const back = this.top !== undefined && h.number < this.top.number;
    this.top = h;
    if (!changed) return;
    for (const fn of back ? [...this.subscribers, ...this.backListeners] : this.subscribers) {
      try {
        fn(h);
      } catch (err) {
        this.opts.log?.warn({ chain: this.opts.name, err: (err as Error).message }, 'chain head subscriber failed');
      }
    }
  }

  /**
   * Reads the head once per interval, on a grid of its own (a late timer does not move the next read).
   * A read that found no new head came just before the block: the grid moves half an interval later,
   * once, so the reads fall midway between blocks, where jitter on either side costs neither a read
   * that finds nothing nor a block missed. A slot where a reader read the head itself (within half an
   * interval) is skipped.
   */
  private async run(): Promise<void> {
    if (this.nextAt === 0) this.nextAt = Date.now();
    while (this.subscribers.size && !this.stopped) {
      const interval = this.intervalMs;
      const now = Date.now();
      if (this.nextAt > now) {
        await this.sleep(this.nextAt - now);
        continue;
      }
      // Late by more than an interval (a busy process): the grid starts again from now.
      if (now - this.nextAt > interval) this.nextAt = now;
      if (now - this.triedAt < interval / 2) {
        this.nextAt += interval;
        continue;
      }
      const before = this.top?.hash;
      let fresh = false;
      try {
        fresh = (await this.read(0)).hash !== before;
      } catch (err) {
        // The node's health logs an outage once; each failed poll is only worth a debug line.
        this.opts.log?.debug({ chain: this.opts.name, err: (err as Error).message?.split('\n')[0] }, 'chain head read failed');
      }
      this.misses = fresh ? 0 : this.misses + 1;
      this.nextAt += this.misses === 1 ? Math.round(interval / 2) : interval;
    }
    this.loop = undefined;
    if (this.subscribers.size && !this.stopped) this.loop = this.run();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.wakeLoop === done) this.wakeLoop = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeLoop = done;
    });
  }
}

/**
 * When a reader of new blocks (the indexer follower, the chain watcher) reads its next range: at most
 * once per `busyMs` while its reads find logs, once per `idleMs` while they find none, so a quiet chain
 * costs one eth_getLogs per several blocks instead of one per block. Catching up is never held back.
 */
export class ReadPacer {
  private lastAt = 0;
  private idle = false;
  private readTo: bigint | undefined;
  /** The last step stopped short: the next runs at the next head, due or not. */
  private catchingUp = false;

  constructor(private readonly spacing: () => { busyMs: number; idleMs: number }) {}

  /**
   * A background loop's step of a reader of `head` (the indexer follower, the chain watcher): at the
   * shared reader's head (at most `maxAgeMs` old), runs `step` while catching up or when a read is due;
   * true when there is more to read right away. A step that throws is looked at again at the next head.
   */
  async tick(head: ChainHead, o: { maxAgeMs: number; confirmations: number }, step: (head: bigint) => Promise<boolean>): Promise<boolean> {
    const h = await head.latest(o.maxAgeMs);
    if (!this.catchingUp && !this.due(h.number - BigInt(o.confirmations), head.intervalMs / 2)) return false;
    try {
      this.catchingUp = await step(h.number);
    } catch (err) {
      this.retry();
      throw err;
    }
    return this.catchingUp;
  }

  /**
   * Blocks up to `target` are unread and their turn has come. `slackMs`: reads are started by heads,
   * which come once per interval; half of one keeps a read from slipping a whole head.
   */
  due(target: bigint, slackMs = 0): boolean {
    if (this.readTo === undefined) return true;
    if (target <= this.readTo) return false;
    const s = this.spacing();
    return Date.now() - this.lastAt + slackMs >= (this.idle ? Math.max(s.idleMs, s.busyMs) : s.busyMs);
  }

  /** A read covered the blocks up to `to`: `found` logs in them or not; `caughtUp`: nothing is left below the target. */
  read(to: bigint, found: boolean, caughtUp: boolean): void {
    this.lastAt = Date.now();
    this.idle = !found && caughtUp;
    this.readTo = to;
  }

  /** The cursor is at `to` without a read (nothing new yet, or another process read it). */
  at(to: bigint): void {
    if (this.readTo === undefined || to > this.readTo) this.readTo = to;
  }

  /** The cursor went back (a reorg): the next step reads at once. */
  reset(): void {
    this.readTo = undefined;
    this.idle = false;
  }

  /** A step that was due could not read (a block the node did not return, a failed call): looked at again at the next head, not an idle spell later. */
  retry(): void {
    this.idle = false;
  }
}
