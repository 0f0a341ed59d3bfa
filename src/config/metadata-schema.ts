import { z } from 'zod';
import { readSharesFields } from './read-shares-schema.ts';

// The config sections of token metadata: fetching documents (limits and fair shares), refreshing them,
// and the watcher that follows chains for metadata updates and mints.

export const MetadataConfigSchema = z
  .object({
    /** How long a request waits for a token seen for the first time before answering NOT_AVAILABLE. */
    inlineWaitMs: z.number().int().min(0).max(60_000).default(5_000),
    /** Stored metadata older than this is served with status REFRESHING while it is re-read. */
    staleAfterSec: z.number().int().positive().default(86_400),
    /** A token whose URI read reverted (not minted?) is asked again after this long. */
    notFoundRetrySec: z.number().int().min(0).default(60),
    /** A token whose document could not be fetched is retried after this long (Retry-After wins). */
    failureRetrySec: z.number().int().min(0).default(300),
    maxBytes: z
      .number()
      .int()
      .positive()
      .default(2 * 1024 * 1024),
    connectTimeoutMs: z.number().int().positive().default(5_000),
    fetchTimeoutMs: z.number().int().positive().default(20_000),
    maxRedirects: z.number().int().min(0).max(20).default(5),
    hedgeDelayMs: z.number().int().min(0).default(1_000),
    /** Exceptions to the private-network rule, e.g. a local IPFS node: "10.0.0.5:8080". */
    allowedPrivateHosts: z.array(z.string().min(1)).default([]),
    /** Documents fetched at once by one process. */
    fetchConcurrency: z.number().int().positive().max(1024).default(32),
    /**
     * Shares of those slots (docs/metadata.md, "Fair shares"). One origin host (host:port) fetches
     * at most perHostConcurrency documents at once (more once it has shown it answers quickly), and
     * keyless reads start at most keylessHostRatePerSec fetches a second at one host (burst
     * keylessHostBurst, the fleet together): a slow or hostile host holds a few slots, never all, and no host is sent a
     * flood on behalf of callers nobody can hold to account. The configured IPFS and Arweave gateways together share
     * gatewayConcurrency instead (no rate, no earning).
     */
    perHostConcurrency: z.number().int().min(1).max(1024).default(4),
    /**
     * What a host earns above perHostConcurrency while it answers quickly: one slot per document
     * answered within fastHostMs, halved for each slower one (default: all of fetchConcurrency).
     */
    perHostMaxConcurrency: z.number().int().min(1).max(1024).optional(),
    fastHostMs: z.number().int().positive().default(1_000),
    keylessHostRatePerSec: z.number().positive().default(20),
    keylessHostBurst: z.number().int().min(1).default(100),
    /** Default: all of fetchConcurrency (the gateways are the operator's, and most collections live there). */
    gatewayConcurrency: z.number().int().min(1).max(1024).optional(),
    /** Slots callers without an access key hold together, whatever their addresses. */
    keylessConcurrency: z.number().int().min(1).max(1024).default(16),
    /** Documents one caller (an access key, or a keyless client address) may have waiting for a slot; past that 429. */
    maxWaitingPerCaller: z.number().int().min(1).default(1_000),
    /**
     * Unseen tokens a keyless client address may have fetched, the fleet together: a token bucket charged
     * per new id fetched (cached ids cost nothing), so one request cannot make 100 requests to a host.
     */
    keylessFetchesPerSec: z.number().positive().default(10),
    keylessFetchBurst: z.number().int().min(1).default(100),
    /** A document body that sends nothing for this long mid-transfer is given up (TIMEOUT). */
    stallTimeoutMs: z.number().int().min(0).default(5_000),
    /** Tokens held in each process's hot cache in front of the database, and for how long. */
    hotCacheSize: z.number().int().min(0).default(50_000),
    hotCacheTtlMs: z.number().int().min(0).default(5_000),
    /**
     * Memory each process may give to token search's posting lists (MB): searched contracts are
     * held in memory, kept at the database's version, and searched there; 0 searches in SQL only.
     */
    searchMemoryMB: z.number().int().min(0).max(65_536).default(256),
    /**
     * Shares of a key's metadata reads (docs/metadata.md, "Fair shares of reads"), as the indexer's
     * (indexer.readShares): the rates for the fleet's API processes together, the concurrency and queue
     * per process: a read costs ceil(rows asked / rowsPerUnit) units (tokens,
     * contracts or search results; http/metadata/read-shares.ts WEIGHTS). Each key spends keyUnitsPerSec
     * (burst keyBurst); each client network of a publishable key (ipv4Prefix / ipv6Prefix) a
     * clientFraction of that, with at most clientConcurrency units running and clientQueue requests
     * waiting; past a share, 429 naming it.
     */
    readShares: z
      .object({
        ...readSharesFields(25),
      })
      .prefault({}),
  })
  .prefault({});

export const RefreshConfigSchema = z
  .object({
    /** A token refreshed by a task this recently is not re-queued; the earlier task is returned. */
    coolOffSec: z.number().int().min(0).default(600),
    /** Tokens a project may have queued at once. */
    maxQueuedPerProject: z.number().int().positive().default(100_000),
    /** Contracts a project may keep in the mint monitor (each one the watchers read the logs of). */
    maxMintMonitorsPerProject: z.number().int().positive().default(100),
    /** How long a worker holds claimed items before another worker may take them over. */
    leaseSec: z.number().int().positive().default(60),
    maxAttempts: z.number().int().min(1).max(20).default(5),
    backoffBaseMs: z.number().int().positive().default(2_000),
    backoffMaxMs: z.number().int().positive().default(300_000),
    /** Items a worker claims at once. */
    claimBatch: z.number().int().min(1).max(1000).default(50),
    pollMs: z.number().int().positive().default(500),
    /** Tasks with more tokens than this run behind small interactive ones. */
    largeTaskThreshold: z.number().int().positive().default(1_000),
    /** Block range per eth_getLogs when enumerating a contract's tokens from its transfers. */
    logChunkBlocks: z.number().int().positive().default(10_000),
  })
  .prefault({});

export const WatcherConfigSchema = z
  .object({
    /** Blocks behind the head the watcher stays, so shallow reorgs never reach it. */
    confirmations: z.number().int().min(0).default(2),
    pollMs: z.number().int().positive().default(2_000),
    /** While the watcher's reads find no events, it reads at most this often: one eth_getLogs for the blocks of this long. */
    idleReadMs: z.number().int().min(0).default(5_000),
    /** Blocks per eth_getLogs. */
    maxBlocksPerPoll: z.number().int().positive().default(2_000),
  })
  .prefault({});
