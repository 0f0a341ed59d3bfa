import { z } from 'zod';
import { readSharesFields } from './read-shares-schema.ts';
import { Address } from './fields.ts';

// The config of the indexer: what it reads on a chain, and the process-wide settings of backfills,
// balance streams and the fair shares of reads.

/** What the indexer reads on a chain (#17): transfers of every contract, or of a watchlist. */
export const IndexerChainConfigSchema = z.object({
  /** 'all': a chain-wide log scan; 'watchlist': only `contracts` and those projects register; 'off'. */
  scope: z.enum(['off', 'all', 'watchlist']).default('all'),
  contracts: z.array(Address).default([]),
  /** First block the head follower reads when it has no cursor yet (default: the confirmed head at first start). */
  fromBlock: z.number().int().min(0).optional(),
  /** Blocks behind the head the follower stays. */
  confirmations: z.number().int().min(0).max(1024).default(2),
  /** Most blocks per eth_getLogs; a node that refuses a range makes it shrink. */
  chunkBlocks: z.number().int().min(1).max(1_000_000).default(2_000),
  pollMs: z.number().int().positive().default(1_000),
  /** While the follower's reads find no transfers, it reads at most this often: one eth_getLogs for the blocks of this long (0: every head). */
  idleReadMs: z.number().int().min(0).default(5_000),
  /** Recent block hashes remembered to trace a reorg back to where the forks meet. */
  reorgWindow: z.number().int().min(1).max(10_000).default(128),
});

export const IndexerServiceConfigSchema = z
  .object({
    /** Blocks per backfill range: the unit worker processes lease and share. */
    backfillRangeBlocks: z.number().int().min(1).default(10_000),
    /** How long a worker holds a backfill range before another may take it over. */
    leaseSec: z.number().int().positive().default(60),
    /**
     * Balance batches one SubscribeBalanceUpdates stream may have waiting for their USD prices; past it the
     * stream is ended (the client reconnects) rather than queue without bound behind slow price reads.
     */
    streamPriceBacklog: z.number().int().min(1).max(10_000).default(64),
    /**
     * Shares of a key's indexer reads (docs/indexer.md, "Fair shares of reads"): the rates for the
     * fleet's API processes together, the concurrency and queue per process. A read
     * costs ceil(rows asked / rowsPerUnit) units, times metadataWeight when metadata comes with it.
     * Each key spends keyUnitsPerSec (burst keyBurst); each client network of a publishable key
     * (ipv4Prefix / ipv6Prefix) a clientFraction of that, with at most clientConcurrency units
     * running at once and clientQueue requests waiting; past a share, 429 naming it.
     */
    readShares: z
      .object({
        ...readSharesFields(50),
        metadataWeight: z.number().min(1).default(2),
      })
      .prefault({}),
  })
  .prefault({});
