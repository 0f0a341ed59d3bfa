import type { ChainClient } from '../chain/client.ts';
import type { UnreadBlocksConfig } from '../chain/unread-blocks.ts';
import type { IndexerChainConfig } from '../config/schema.ts';
import type { Db } from '../store/db.ts';
import type { Logger } from '../telemetry/logger.ts';
import type { Metrics } from '../telemetry/metrics.ts';
import { balanceReader, type BalanceReader } from './balance-reader.ts';
import { IndexFollower, readCursor, type Cursor } from './follower.ts';
import { addressFilter, watchlist, type IndexScope } from './watchlist.ts';
import { BackfillWorker, type BackfillWorkerDeps } from './backfill.ts';
import type { IndexHooks } from './transfer-store.ts';
import { StreamTail } from './stream-tail.ts';

/**
 * Token metadata and contract info for answers with `includeMetadata`, given by the wiring (the
 * metadata service): what it holds now, never waiting on an origin; what it does not hold yet
 * comes back with its status and is resolved in the background.
 */
export interface IndexerMetadata {
  /** Each contract's ContractInfo as JSON text, by address (see ContractInfoCache). */
  contracts(chain: ChainClient, addresses: string[]): Promise<Map<string, string>>;
  /** Each token's TokenMetadata as JSON text, in request order. */
  tokens(chain: ChainClient, contract: string, ids: string[]): Promise<string[]>;
  /** The contracts of a chain that count as verified (contractStatus, metadataOptions.verifiedOnly): the token directory's. */
  verified(chainId: number): Promise<string[]>;
}

/** One indexed chain: its follower, its reads, its watchlist and what its streams are fed. */
export class ChainIndexer {
  readonly follower: IndexFollower;
  readonly reads: BalanceReader;
  readonly watchlist: ReturnType<typeof watchlist>;
  /** The blocks and balances the follower passes, for the Subscribe* streams (runs only while one is open). */
  readonly tail: StreamTail;

  constructor(
    readonly chain: ChainClient,
    readonly cfg: IndexerChainConfig & { scope: IndexScope; logReads: UnreadBlocksConfig },
    readonly db: Db,
    log: Logger,
    metrics?: Metrics,
    /**
     * Told the balances each step changes (the wiring records `balance.updated` for watchlist chains), the
     * transfers it records for the first time and the logs a reorg takes away (webhook listeners are
     * told of both); a backfill's balances and transfers too.
     */
    readonly hooks: IndexHooks = {},
  ) {
    this.follower = new IndexFollower(chain, cfg, { db, log, metrics, addresses: addressFilter(db, chain.chainId, cfg.scope, cfg.contracts), hooks });
    this.reads = balanceReader(db, chain.chainId);
    this.watchlist = watchlist(db, chain.chainId, cfg.contracts);
    this.tail = new StreamTail({ chain, cursor: () => this.cursor(), reads: this.reads, watched: addressFilter(db, chain.chainId, cfg.scope, cfg.contracts), pollMs: cfg.pollMs, log, metrics });
  }

  get scope(): IndexScope {
    return this.cfg.scope;
  }

  cursor(): Promise<Cursor | null> {
    return readCursor(this.db, this.chain.chainId, this.cfg.scope);
  }
}

/** A backfill worker for the chains this process indexes, with each chain's scope and log span. */
export function backfillWorkerFor(db: Db, indexers: ReadonlyMap<number, ChainIndexer>, leaseSec: number, onChunk?: BackfillWorkerDeps['onChunk']): BackfillWorker {
  return new BackfillWorker({
    db,
    chains: new Map([...indexers].map(([id, ix]) => [id, ix.chain])),
    addresses: (chainId, scope) => addressFilter(db, chainId, scope, indexers.get(chainId)?.cfg.contracts ?? []),
    chunkBlocks: (chainId) => indexers.get(chainId)?.cfg.chunkBlocks ?? 2_000,
    leaseSec,
    onChunk,
    // Blocks a backfill passes over are the follower's to retry (its reads cover the backfill's contracts).
    unread: (chainId) => indexers.get(chainId)?.follower.unread,
    // Each chain's own hooks: a backfill's balances and transfers are told as its follower's are.
    hooks: (chainId) => indexers.get(chainId)?.hooks,
  });
}
