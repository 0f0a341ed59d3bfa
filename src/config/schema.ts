import { z } from 'zod';
import { Address, Decimal } from './fields.ts';
import { PG_SESSION_DEFAULTS } from '../store/pg-session.ts';
import { LEADERSHIP_DEFAULTS } from '../store/leadership.ts';
import { ChainPricesConfigSchema, NativeUsdFeedSchema, PriceSourceSchema } from './price-schema.ts';

export { PriceSourceSchema, type ChainPricesConfig } from './price-schema.ts';

const httpUrl = z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' });

const AccessMode = z.enum(['required', 'optional']);

const PrivateKey = z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be a 32-byte 0x private key');

export const FeeTokenConfigSchema = z
  .object({
    /** The ERC20 contract; null means the chain's native currency. */
    address: Address.nullable().default(null),
    name: z.string().min(1),
    symbol: z.string().min(1),
    decimals: z.number().int().min(0).max(36),
    logoURL: z.string().default(''),
    /**
     * What one whole token is worth in the native currency (a fixed rate; e.g. "0.0004" for a $1 token when ETH is $2 500).
     * With `prices`, the last fallback; without it, the only price. Omit it to have no fixed fallback.
     */
    nativePrice: Decimal.optional(),
    /** Live price sources, tried in order (docs/fee-prices.md); the fixed `nativePrice` after them. */
    prices: z.array(PriceSourceSchema).max(4).default([]),
  })
  .refine((t) => t.nativePrice !== undefined || t.prices.length > 0, { message: 'a fee token needs prices or a fixed nativePrice', path: ['nativePrice'] });

export const RelayerChainConfigSchema = z
  .object({
    /** The Sequence v2 wallet contracts; default: their production addresses. */
    context: z.object({ factory: Address, mainModule: Address, mainModuleUpgradable: Address, guestModule: Address, utils: Address }).optional(),
    /**
     * EIP-7702: wallet implementations (DelegatedWallet, contracts/DelegatedWallet.sol) an EOA may delegate
     * to and have its bundles relayed (docs/relayer-7702.md). Empty: authorizations are refused.
     */
    delegatedWallets: z.array(Address).max(16).default([]),
    /** Keys of the EOAs that sign and pay for relayed transactions. Keep them secret. */
    senderKeys: z.array(PrivateKey).default([]),
    /** Or derive senders from a BIP-39 mnemonic (m/44'/60'/0'/0/i, i < senderCount), after senderKeys. */
    senderMnemonic: z.string().min(1).optional(),
    senderCount: z.number().int().min(1).max(256).default(1),
    /** A sender whose balance (in ether) falls below this takes no new work until topped up. */
    minSenderBalance: Decimal.default('0'),
    /**
     * Optional sender refill: a treasury key that tops a sender up to `targetBalance` (ether) when it falls
     * below minSenderBalance (docs/project-balances.md). Keep the key secret.
     */
    refill: z.object({ treasuryKey: PrivateKey, targetBalance: Decimal }).strict().optional(),
    /** Optional early warning above minSenderBalance: crossing it sends sender.low_balance with level "warning" (the sender keeps working). */
    warnSenderBalance: Decimal.optional(),
    /**
     * How often a quiet sender (nothing in flight, above its floor) has its nonces and balance read from the
     * node; busy senders are read every block. Lower it to notice balances changed from outside sooner, at
     * more node calls (docs/production.md, node-call sizing).
     */
    quietSenderReadMs: z.number().int().min(0).default(30_000),
    /** Signed transactions a sender may have in flight (not yet mined) at once. */
    maxInFlightPerSender: z.number().int().min(1).max(1024).default(64),
    /** Where fees are paid to (default: the first sender). */
    paymentAddress: Address.optional(),
    /** No fee required (FeeTokens says isFeeRequired=false); every valid bundle is relayed. */
    gasless: z.boolean().default(false),
    feeTokens: z.array(FeeTokenConfigSchema).default([]),
    /** The native/USD Chainlink feed that `quote: 'usd'` price sources divide by (docs/fee-prices.md). */
    nativeUsdFeed: NativeUsdFeedSchema.optional(),
    /** The wrapped native token (WETH) that `uniswapV3` price sources' pools pair the fee token with. */
    wrappedNative: Address.optional(),
    /** The fee is the gas cost times this. */
    feeMarkup: z.number().min(1).max(100).default(1.2),
    /**
     * A fee pays for the whole gas limit at the gas price times this: the room the base fee has to climb
     * between intake and inclusion. No attempt offers more per gas than the fee pays for over the limit, so
     * past it a fee-paying bundle waits for the base fee to fall (docs/relayer-worst-case.md).
     */
    feePriceRoom: z.number().min(1).max(10).default(1.25),
    /** Gas limit = simulated gas times this (plus the intrinsic cost). */
    gasMargin: z.number().min(1).max(10).default(1.25),
    /** Bundles needing more gas than this are refused. */
    maxGasLimit: z.number().int().positive().default(15_000_000),
    quoteTtlSec: z.number().int().positive().default(300),
    /** How long GetMetaTxnReceipt waits for a final status before answering with the current one. */
    receiptWaitMs: z.number().int().min(0).max(60_000).default(15_000),
    /** How often the dispatcher looks for new work and new blocks. */
    pollMs: z.number().int().positive().default(500),
    /** A queued meta-transaction waiting on a predecessor (a nonce gap) for this long is DROPPED. */
    queueTimeoutSec: z.number().int().positive().default(300),
    /** A meta-transaction whose preconditions have not held for this long after SendMetaTxn is DROPPED. */
    preconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(3_600),
    /** Preconditions one meta-transaction may carry (every one is read once per block while it waits). */
    maxPreconditions: z.number().int().min(1).max(64).default(8),
    /** Meta-transactions of the chain waiting on preconditions at once (all are read every block); past it, new ones are refused. */
    maxPendingPreconditions: z.number().int().min(1).max(20_000).default(2_000),
    /** ... of them one project may hold (each keyed project has its own share of the pool). */
    maxPendingPreconditionsPerProject: z.number().int().min(1).max(20_000).default(500),
    /** The share of maxPendingPreconditions (percent, rounded up) that callers without an access key may hold together; 0: none. */
    anonymousPendingPreconditionsPercent: z.number().int().min(0).max(100).default(10),
    /** preconditionTimeoutSec for a meta-transaction sent without an access key (the shorter of the two applies). */
    anonymousPreconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(600),
    /**
     * What one client network (lossBudget.ipv4Prefix / ipv6Prefix) may hold of its project's share, or of
     * the keyless share (percent, rounded up): a dapp's key is public, and 500 free sponsored rows from
     * three addresses filled a project's share for an hour (issue 54).
     */
    pendingPreconditionsPerClientPercent: z.number().int().min(1).max(100).default(10),
    /** ... and one wallet (percent, rounded up; maxQueuedPerWallet bounds it too). */
    pendingPreconditionsPerWalletPercent: z.number().int().min(1).max(100).default(5),
    /**
     * preconditionTimeoutSec for a sponsored meta-transaction (it pays no fee) whose wallets have no history
     * (the call deploys them: they have never run a transaction); the shortest that applies wins. Such rows
     * cost their sender nothing, so they hold their place in the pool for a shorter time.
     */
    newWalletSponsoredPreconditionTimeoutSec: z
      .number()
      .int()
      .positive()
      .max(7 * 86_400)
      .default(600),
    /** A bundle's nonce may be at most this far past the wallet's next one (counting its queued meta-transactions). */
    maxNonceAhead: z.number().int().min(0).max(1024).default(8),
    /** Meta-transactions one wallet may have queued or in flight at once. */
    maxQueuedPerWallet: z.number().int().min(1).default(16),
    /** ... one access key (every caller of a browser dapp shares its key). */
    maxQueuedPerKey: z.number().int().min(1).default(5_000),
    /** ... one client address (IP), sent without an access key (keyed sends are bounded by maxQueuedPerKey instead). */
    maxQueuedPerAddress: z.number().int().min(1).default(200),
    /** The gas limit of a meta-transaction sent without an access key (it pays its own fee) is at most this; so is each bundle FeeOptions and Simulate run for such a caller. */
    anonymousMaxGasLimit: z.number().int().positive().default(3_000_000),
    /**
     * What fee-paying callers can cost the relayer when their fee is not final by construction (a bundle
     * can revert when mined and take its fee with it): each such meta-transaction counts its worst case
     * (its fee's worth, which bounds what any attempt of it may be signed for) while it is live, and what
     * it cost without its fee for an hour after; a new one is refused when a budget it counts against is
     * full (docs/relayer-worst-case.md). Amounts in gas, worth the chain's gas price at the time of the
     * check, so one default fits every chain.
     */
    lossBudget: z
      .object({
        /** One fee-paying wallet (at least maxGasLimit × feePriceRoom, or the largest bundles could never be sent). */
        perWalletGas: z.number().int().positive().default(20_000_000),
        /** One client network (ipv4Prefix / ipv6Prefix), over every key and none. */
        perClientGas: z.number().int().positive().default(40_000_000),
        /** One client network under one access key (keyless callers count as one key). */
        perKeyClientGas: z.number().int().positive().default(40_000_000),
        /** One access key, over all its clients. */
        perKeyGas: z.number().int().positive().default(400_000_000),
        /** Every caller without an access key together: the most strangers without a key can cost per hour. */
        keylessGas: z.number().int().positive().default(100_000_000),
        /** The client network of an IPv4 / IPv6 address: a /24 or a /48 is one client (one attacker has many addresses in it). */
        ipv4Prefix: z.number().int().min(8).max(32).default(24),
        ipv6Prefix: z.number().int().min(16).max(128).default(48),
        /** Fees that did not arrive from this many client networks of one key within a day bar the whole key (and alert). */
        keyBarAfterNetworks: z.number().int().min(2).max(1_000).default(3),
      })
      .strict()
      .default({
        perWalletGas: 20_000_000,
        perClientGas: 40_000_000,
        perKeyClientGas: 40_000_000,
        perKeyGas: 400_000_000,
        keylessGas: 100_000_000,
        ipv4Prefix: 24,
        ipv6Prefix: 48,
        keyBarAfterNetworks: 3,
      }),
    /** Bundles one FeeOptions call may carry: each is a simulation of its own on the node. */
    maxFeeOptionsBundles: z.number().int().min(1).max(256).default(16),
    /** State-override bytes (code placed for simulation) one FeeOptions call may send the node, over all its bundles. */
    maxOverrideBytes: z.number().int().min(1_024).max(16_777_216).default(262_144),
    /** A transaction not included within this many blocks is replaced at the same nonce with higher fees. */
    resubmitAfterBlocks: z.number().int().min(1).default(3),
    /**
     * A slot whose last attempt's max fee has been below the next base fee for this many blocks, and that
     * no replacement within its cover can lift over it, is freed: a zero-value self-transfer at market fees,
     * paid by the relayer, takes its nonce and its meta-transactions are DROPPED (docs/relayer-worst-case.md).
     */
    unblockAfterBlocks: z.number().int().min(1).max(10_000).default(10),
    /**
     * Senders (of those a process holds, when it holds more) kept for bundles that pay today's price: one
     * whose cover cannot pay for the first attempt's max fee (the base fee doubled) never goes to them.
     */
    reserveSenders: z.number().int().min(0).max(256).default(1),
    /** How much a replacement raises both fees over the last broadcast; nodes refuse less than 10. */
    replacementBumpPercent: z.number().int().min(10).max(1000).default(10),
    /** No transaction is signed with a max fee per gas above this (gwei); a replacement that would need more waits. */
    feeCapGwei: z.number().positive().default(500),
    /** The lowest priority fee offered (gwei), whatever recent blocks paid. */
    minPriorityFeeGwei: z.number().min(0).default(0.001),
    /** Blocks a mined transaction is watched for reorgs; its meta-transaction is final after this many. */
    confirmations: z.number().int().min(1).max(256).default(3),
    /** Pack up to this many ready meta-transactions of different wallets into one guest-module transaction (1 = off). */
    batchSize: z.number().int().min(1).max(64).default(1),
  })
  .refine((r) => r.senderKeys.length > 0 || r.senderMnemonic, { message: 'a relayer needs senderKeys or a senderMnemonic', path: ['senderKeys'] })
  .refine((r) => !r.refill || Number(r.refill.targetBalance) > Number(r.minSenderBalance), { message: 'refill.targetBalance must be above minSenderBalance', path: ['refill', 'targetBalance'] })
  .refine((r) => r.nativeUsdFeed || !r.feeTokens.some((t) => t.prices.some((p) => p.kind === 'chainlink' && p.quote === 'usd')), {
    message: "a chainlink price quoted in 'usd' needs the relayer's nativeUsdFeed",
    path: ['nativeUsdFeed'],
  })
  .refine((r) => r.wrappedNative || !r.feeTokens.some((t) => t.prices.some((p) => p.kind === 'uniswapV3')), { message: "a uniswapV3 price needs the relayer's wrappedNative", path: ['wrappedNative'] })
  .refine((r) => !r.feeTokens.some((t) => t.address === null && t.prices.length > 0), { message: 'the native fee token is worth exactly 1: it takes no price sources', path: ['feeTokens'] });

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

export const ChainConfigSchema = z.object({
  chainId: z.number().int().positive(),
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, 'must be lower-case letters, digits and dashes'),
  /** Several URLs mean failover, in order. */
  rpcUrls: z.array(httpUrl).min(1, 'needs at least one RPC URL'),
  /** JSON-RPC requests issued together are sent as one HTTP batch of at most this many (1 = no batching). */
  rpcBatchSize: z.number().int().min(1).max(1000).default(200),
  /** A JSON-RPC call not answered within this long fails over to the next URL (a broadcast is then looked up, never re-signed). */
  rpcTimeoutMs: z.number().int().positive().default(10_000),
  /**
   * The chain's block time: how often the head is read (once for the dispatcher, the watcher and the
   * indexer of the process). Unset: learned from the blocks' timestamps, kept within 1–2 s; set it on a
   * slower chain (12000 on Ethereum) to read the head once per block (docs/production.md, node calls).
   */
  blockTimeMs: z.number().int().min(50).max(600_000).optional(),
  /**
   * First blocks of contracts, by address: where a whole-contract refresh and a watchlist backfill start
   * reading its events. Needed only when the node keeps no old state and the contract has no event
   * near its deployment (docs/production.md#hosted-providers); otherwise found from the node.
   */
  startBlocks: z.record(Address, z.number().int().min(0)).default({}),
  /**
   * How the chain charges a transaction's sender (docs/relayer-l2.md): `ethereum` (EIP-1559, or legacy where
   * the node has no base fee), `legacy`, `opStack` (an L1 data fee on top), `arbitrum` (L1 gas inside the
   * limit). Default: by chain id (OP Mainnet, Base, … opStack; Arbitrum One, Nova, Sepolia arbitrum), else ethereum.
   */
  feeModel: z.enum(['ethereum', 'legacy', 'opStack', 'arbitrum']).optional(),
  /** Follow this chain's blocks and refresh metadata on ERC-4906 / ERC-1155 URI events and new mints. */
  watch: z.boolean().default(true),
  /** First block the watcher reads when it has no cursor yet (default: the head at first start). */
  watchFromBlock: z.number().int().min(0).optional(),
  /** Relay Sequence meta-transactions on this chain, served at /relayer/<name>. */
  relayer: RelayerChainConfigSchema.optional(),
  /** A test network: the token directory hides it unless asked (default: the well-known network's flag, else false). */
  testnet: z.boolean().optional(),
  /** Index token transfers and balances on this chain, served at /indexer/<name>. */
  indexer: IndexerChainConfigSchema.optional(),
  /** USD prices for the indexer's answers (balances, GetTokenPrice(s), ListTokenPrices); absent: nothing is priced. */
  prices: ChainPricesConfigSchema.optional(),
});

export const AppConfigSchema = z
  .object({
    port: z.number().int().min(0).max(65535).default(4000),
    host: z.string().min(1).default('127.0.0.1'),
    /** A postgres:// URL, a PGlite data folder, or memory:// (PGlite in memory). */
    database: z.string().min(1).default('./.metarelay/db'),
    /**
     * PostgreSQL connections of each process (ignored on PGlite; docs/production.md): the main pool's
     * size (the relayer's dispatchers add 5 of their own), and the session bounds that keep a frozen
     * lock holder from stalling the fleet. 0 turns a bound off.
     */
    postgres: z
      .object({
        poolSize: z.number().int().min(1).max(1000).default(PG_SESSION_DEFAULTS.poolSize),
        lockTimeoutMs: z.number().int().min(0).default(PG_SESSION_DEFAULTS.lockTimeoutMs),
        idleInTransactionTimeoutMs: z.number().int().min(0).default(PG_SESSION_DEFAULTS.idleInTransactionTimeoutMs),
        /**
         * One process per chain follows it (leadership.ts): how often the others try to take over, and
         * the leader checks its lock connection. A dead leader is replaced within about this.
         */
        leaderCheckMs: z.number().int().min(100).max(600_000).default(LEADERSHIP_DEFAULTS.checkMs),
        /** The server ends a lock connection silent this long (a frozen or cut-off leader lets go); above leaderCheckMs. */
        leaderSessionTimeoutMs: z.number().int().min(1_000).max(3_600_000).default(LEADERSHIP_DEFAULTS.sessionTimeoutMs),
      })
      .refine((p) => p.leaderSessionTimeoutMs > 2 * p.leaderCheckMs, {
        message: 'postgres.leaderSessionTimeoutMs must be more than twice postgres.leaderCheckMs (a leader that checks in time must not lose its lock)',
      })
      .prefault({}),
    chains: z.array(ChainConfigSchema).default([]),
    ipfsGateways: z.array(httpUrl).min(1).default(['https://ipfs.io/ipfs/', 'https://dweb.link/ipfs/']),
    arweaveGateway: httpUrl.default('https://arweave.net/'),
    /** Metadata fetching refuses loopback/private/link-local targets unless this is true (dev and tests). */
    allowPrivateNetworks: z.boolean().default(false),
    /**
     * Per-client limits and bars count an IPv6 caller by its network of this prefix length (one
     * subscriber usually holds a whole /64); 128: the exact address. IPv4 addresses are always exact.
     */
    clientIpv6Prefix: z.number().int().min(16).max(128).default(64),
    auth: z
      .object({
        rpc: AccessMode.default('required'),
        rest: AccessMode.default('optional'),
        /** RPC methods answered without a key even when rpc is 'required'. */
        publicMethods: z.array(z.string()).default(['Ping', 'Version']),
        /** How long a key lookup is cached per process; a revocation elsewhere takes effect within this. */
        keyCacheMs: z.number().int().min(0).default(30_000),
        /**
         * Default token bucket of every access key (a key's own setting wins). No ratePerSec: keys
         * without their own limit are not limited, and cost no database write per request.
         */
        rateLimit: z
          .object({
            ratePerSec: z.number().positive().optional(),
            burst: z.number().int().min(1).optional(),
          })
          .prefault({}),
      })
      .prefault({}),
    metadata: z
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
         * keylessHostBurst): a slow or hostile host holds a few slots, never all, and no host is sent a
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
         * Unseen tokens a keyless client address may have fetched, per process: a token bucket charged
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
      })
      .prefault({}),
    refresh: z
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
      .prefault({}),
    watcher: z
      .object({
        /** Blocks behind the head the watcher stays, so shallow reorgs never reach it. */
        confirmations: z.number().int().min(0).default(2),
        pollMs: z.number().int().positive().default(2_000),
        /** While the watcher's reads find no events, it reads at most this often: one eth_getLogs for the blocks of this long. */
        idleReadMs: z.number().int().min(0).default(5_000),
        /** Blocks per eth_getLogs. */
        maxBlocksPerPoll: z.number().int().positive().default(2_000),
      })
      .prefault({}),
    media: z
      .object({
        /** Cache token media (image, image_data, animation_url) and serve renditions at /media/. */
        enabled: z.boolean().default(true),
        /** Largest media file fetched, in bytes. */
        maxBytes: z
          .number()
          .int()
          .positive()
          .default(50 * 1024 * 1024),
        fetchTimeoutMs: z.number().int().positive().default(60_000),
        /**
         * Fetch a token's media as soon as the token resolves through the API for a caller with an access
         * key (otherwise on first request). Keyless reads never queue media: they would fill the queue for free.
         */
        eager: z.boolean().default(true),
        /** Media files fetched and probed at once by one process (its own queue: documents never wait on it). */
        concurrency: z.number().int().min(1).max(256).default(4),
        /** Eager fetches waiting for a slot; past this new ones are dropped (fetched lazily later). */
        maxQueued: z.number().int().min(0).default(10_000),
        /**
         * Media fetches one origin host (host:port) runs at once; waiting fetches are served round-robin
         * across hosts, so a host whose files never finish holds this many slots, not the pool. The
         * configured IPFS and Arweave gateways together run gatewayConcurrency.
         */
        perHostConcurrency: z.number().int().min(1).max(256).default(2),
        /** A host earns a slot (up to concurrency) per file fetched within this, and halves them for each slower one. */
        fastHostMs: z.number().int().positive().default(2_000),
        gatewayConcurrency: z.number().int().min(1).max(256).default(3),
        /** A media body that sends nothing for this long mid-transfer is given up (TIMEOUT). */
        stallTimeoutMs: z.number().int().min(0).default(10_000),
        /** Images with more pixels than this (width × height × frames) are refused: decompression bombs. */
        maxInputPixels: z.number().int().positive().default(100_000_000),
        /** Animated images with more frames than this are refused. */
        maxFrames: z.number().int().min(1).default(1_000),
        /** A failed media fetch is tried again after this long. */
        failureRetrySec: z.number().int().min(0).default(3_600),
        /**
         * A field whose bytes the blob store refused (disk full, not writable, S3 errors) is fetched again
         * after this long, by the background process: the store's fault is local and usually brief.
         */
        storeRetrySec: z.number().int().min(1).max(86_400).default(60),
        /** How often the background process looks for blobs a crash left behind (unreferenced rows, bytes with no row); 0 turns it off. */
        orphanSweepSec: z.number().int().min(0).default(3_600),
        /** Stored bytes younger than this are never taken for orphans (an ingest may be committing them). */
        orphanGraceSec: z.number().int().min(60).default(3_600),
        /** Put the cached URL in `image` itself (the origin's URL stays in the raw document). */
        rewriteImage: z.boolean().default(false),
        /** Absolute base of the URLs put in `assets` (e.g. https://meta.example.com); default: the listening address. */
        publicUrl: httpUrl.optional(),
        /** Where blobs live: a folder (default `<data dir>/media`, next to the PGlite folder) or S3-compatible storage. */
        store: z
          .discriminatedUnion('type', [
            z.object({ type: z.literal('folder'), path: z.string().min(1).optional() }),
            z.object({
              type: z.literal('s3'),
              bucket: z.string().min(3),
              region: z.string().min(1).default('us-east-1'),
              /** For S3-compatible services (MinIO, R2, …); omitted for AWS. */
              endpoint: httpUrl.optional(),
              forcePathStyle: z.boolean().default(false),
              /** Key prefix inside the bucket. */
              prefix: z.string().default(''),
              // Credentials come from the environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the
              // SDK's other providers), never from this file.
            }),
          ])
          .default({ type: 'folder' }),
      })
      .prefault({}),
    /** Log reads of the indexer and the metadata watcher (docs/indexer.md, "Blocks too big to read"). */
    logReads: z
      .object({
        /** Polls in a row a single block's logs may fail to be read (even split) before it is flagged and passed over. */
        blockAttempts: z.number().int().min(1).max(1_000).default(5),
        /** A passed-over block is read again after this long, then after twice as long each time it fails (up to 64×). */
        retrySec: z.number().int().min(0).default(300),
      })
      .prefault({}),
    indexer: z
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
         * Shares of a key's indexer reads (docs/indexer.md, "Fair shares of reads"), per process. A read
         * costs ceil(rows asked / rowsPerUnit) units, times metadataWeight when metadata comes with it.
         * Each key spends keyUnitsPerSec (burst keyBurst); each client network of a publishable key
         * (ipv4Prefix / ipv6Prefix) a clientFraction of that, with at most clientConcurrency units
         * running at once and clientQueue requests waiting; past a share, 429 naming it.
         */
        readShares: z
          .object({
            enabled: z.boolean().default(true),
            rowsPerUnit: z.number().int().min(1).default(50),
            metadataWeight: z.number().min(1).default(2),
            keyUnitsPerSec: z.number().positive().default(1_000),
            keyBurst: z.number().int().min(1).default(2_000),
            clientFraction: z.number().positive().max(1).default(0.1),
            clientConcurrency: z.number().int().min(1).default(40),
            clientQueue: z.number().int().min(0).default(8),
            ipv4Prefix: z.number().int().min(8).max(32).default(24),
            ipv6Prefix: z.number().int().min(16).max(128).default(48),
          })
          .prefault({}),
      })
      .prefault({}),
    /** Run the refresh worker and chain watchers inside `serve`/`dev` (`metarelay worker` runs them alone). */
    inProcessWorker: z.boolean().default(true),
    admin: z
      .object({
        /** Bearer tokens for the admin API (/rpc/Admin/); METARELAY_ADMIN_TOKEN adds one. Keep them secret. */
        tokens: z.array(z.string().min(16, 'admin tokens must be at least 16 characters')).default([]),
      })
      .prefault({}),
    relayer: z
      .object({
        /** Signs fee quotes; every process of one deployment needs the same one (METARELAY_QUOTE_SECRET). */
        quoteSecret: z.string().min(32, 'the quote secret must be at least 32 characters').optional(),
        /** Run the dispatcher (signing, sending, receipts) inside `serve`/`dev`; `metarelay relayer` runs it alone. */
        inProcessDispatcher: z.boolean().default(true),
        /**
         * Rows a sponsorship rule's spend is kept in, each charged by the backends whose pid it is modulo
         * this (docs/sponsorship.md): more lets more intakes of one rule charge at once; a charge past its
         * shard's share of a budget takes the rule's row and shares out again.
         */
        sponsorSpendShards: z.number().int().min(1).max(256).default(16),
        /** Relayer calls without an access key, per client address and process: a token bucket. */
        anonymousRatePerSec: z.number().positive().default(10),
        anonymousBurst: z.number().int().min(1).default(40),
        /** Relayer calls with the admin token (the operator's back office), per process: one bucket of their own. */
        operatorRatePerSec: z.number().positive().default(200),
        operatorBurst: z.number().int().min(1).default(1_000),
        /**
         * Gas that FeeOptions and Simulate may simulate for callers without an access key, per client address
         * and process: a token bucket in gas. A call takes its whole gas budget (anonymousMaxGasLimit) up front
         * and gets back what its simulations did not use; without the budget left, 429 with Retry-After.
         */
        anonymousSimulationGasPerSec: z.number().positive().default(6_000_000),
        anonymousSimulationGasBurst: z.number().int().min(1).default(30_000_000),
        /**
         * Node simulations run at once for callers without an access key, all of them together, per process;
         * past that they wait in line (at most anonymousSimulationQueue, else 429): keyed callers never queue behind them.
         */
        anonymousSimulationConcurrency: z.number().int().min(1).default(2),
        anonymousSimulationQueue: z.number().int().min(0).default(32),
        /** GetMetaTxnReceipt calls held open at once, per process and per client address; past that the current status is answered at once. */
        maxReceiptWaiters: z.number().int().min(0).default(2_000),
        maxReceiptWaitersPerAddress: z.number().int().min(0).default(32),
      })
      .prefault({}),
    webhooks: z
      .object({
        /** How long a receiver has to answer one delivery (connect included) before it counts as failed. */
        deadlineMs: z.number().int().positive().max(60_000).default(5_000),
        /** Failed deliveries are retried with exponential backoff and jitter for this long, then dead-lettered. */
        retryHorizonSec: z.number().int().positive().default(86_400),
        /** The first retry's delay; each next one doubles it (up to an hour), ±50 % jitter. */
        retryBaseMs: z.number().int().positive().default(5_000),
        /** An endpoint that has failed every delivery for this long is disabled (the console says why). */
        disableAfterSec: z.number().int().positive().default(259_200),
        /** Deliveries one process sends at once. */
        concurrency: z.number().int().min(1).max(256).default(16),
        /**
         * Deliveries to one endpoint one process sends at once (default: half of concurrency, rounded up), so
         * a receiver that answers only at the deadline cannot hold every lane while others' events wait.
         */
        maxInFlightPerEndpoint: z.number().int().min(1).max(256).optional(),
        /**
         * Deliveries to one project's endpoints one process sends at once (default: three quarters of
         * concurrency, rounded up), so a project with many slow receivers leaves lanes to the others; the
         * claim also takes due deliveries from each project in turn (docs/webhooks.md, Fair shares).
         */
        maxInFlightPerProject: z.number().int().min(1).max(256).optional(),
        /** How often an idle delivery worker looks for due deliveries (other processes' events). */
        pollMs: z.number().int().positive().default(250),
        /** Webhook targets on loopback/private addresses are refused unless allowPrivateNetworks is true or the host is listed here. */
        allowedPrivateHosts: z.array(z.string().min(1)).default([]),
        /** Outbox events are kept this long (SSE resumes and redelivery reach back this far). */
        retentionSec: z.number().int().positive().default(604_800),
        /** `GET /events` streams open at once: per process, per access key, per client address; past one, 429 with Retry-After. */
        maxStreams: z.number().int().min(1).max(100_000).default(2_000),
        maxStreamsPerKey: z.number().int().min(1).max(100_000).default(100),
        maxStreamsPerAddress: z.number().int().min(1).max(100_000).default(50),
        /**
         * Fair shares of the streams and of the outbox reads they cause (issue 54; docs/webhooks.md "Fair
         * shares"): a key ships in browser apps, so every limit inside a key's allowance is split by client
         * network, and resumes are bounded so a reconnecting client cannot make the database read the whole
         * outbox again and again.
         */
        streamShares: z
          .object({
            /** What one client network may hold of maxStreamsPerKey (percent, rounded up): two addresses held all of a dapp's streams. */
            perKeyClientPercent: z.number().int().min(1).max(100).default(10),
            /** The client network of an address: IPv4 /24 and IPv6 /48 (one attacker holds every address in one). */
            ipv4Prefix: z.number().int().min(8).max(32).default(24),
            ipv6Prefix: z.number().int().min(16).max(128).default(48),
            /** A Last-Event-ID more than this many outbox positions (every project's events) behind the head starts at the head, after a stream.gap event. */
            resumeMaxEvents: z.number().int().min(0).default(50_000),
            /** ... or one whose next event is older than this. */
            resumeMaxAgeSec: z.number().int().min(0).default(86_400),
            /** A resume's catch-up reads the outbox in pages of at most this many positions (one page: one bounded statement). */
            resumePageEvents: z.number().int().min(10).max(100_000).default(1_000),
            /** Catch-up pages one client network may read, a token bucket (per second on average, burst at once); past it, its catch-ups wait. */
            resumePagesPerSec: z.number().positive().default(5),
            resumePageBurst: z.number().int().min(1).default(60),
            /** Resumes (streams opened with a Last-Event-ID) one client address may make, a token bucket; past it, 429 with Retry-After. */
            reconnectsPerMin: z.number().positive().default(12),
            reconnectBurst: z.number().int().min(1).default(20),
          })
          .strict()
          .prefault({}),
        /** The sponsorship approval webhook must answer within this, or the rule does not sponsor. */
        approvalDeadlineMs: z.number().int().positive().max(30_000).default(2_000),
        /** Indexer webhook listeners (AddWebhookListener) one project may have on one chain. */
        maxListeners: z.number().int().min(1).max(10_000).default(50),
        /**
         * Listener deliveries one project is sent for one block of one chain, all its listeners together;
         * the logs past it are counted on each listener (droppedLogs) and in /metrics, not delivered.
         */
        maxListenerDeliveriesPerBlock: z.number().int().min(1).max(1_000_000).default(500),
      })
      .prefault({}),
    console: z
      .object({
        /** Serve the console page at /console and its API at /rpc/Console/. */
        enabled: z.boolean().default(true),
        /** How long a console sign-in lasts. */
        sessionTtlSec: z.number().int().min(60).default(43_200),
        /** Mark the session cookie Secure (set it when the console is served over HTTPS). */
        secureCookie: z.boolean().default(false),
        /**
         * Each project's recent requests (time, method, status, latency, client network; never the key),
         * written in batches every flushMs and cut to the newest keepPerProject rows of each project. At
         * most maxPending rows wait for a write; more are dropped and counted (a database that cannot keep
         * up must not grow the heap).
         */
        requestLog: z
          .object({
            enabled: z.boolean().default(true),
            keepPerProject: z.number().int().min(1).max(100_000).default(500),
            flushMs: z.number().int().min(100).max(60_000).default(2_000),
            maxPending: z.number().int().min(1).max(1_000_000).default(10_000),
          })
          .prefault({}),
        /**
         * When the console and the log warn: a sponsorship rule whose spend reached capShare of a cap (daily,
         * or total budget), and a project balance that covers fewer than tankRunwayDays days of its average
         * spend over the last 7 days (or is empty). Checked every checkEverySec by the background loop.
         */
        alerts: z
          .object({
            capShare: z.number().gt(0).max(1).default(0.8),
            tankRunwayDays: z.number().gt(0).max(365).default(3),
            checkEverySec: z.number().int().min(5).max(86_400).default(60),
          })
          .prefault({}),
      })
      .prefault({}),
    /** SIGTERM/SIGINT: reads are answered this long after new work is refused; everything ends within deadlineMs. */
    shutdown: z.object({ graceMs: z.number().int().min(0).default(2_000), deadlineMs: z.number().int().positive().default(30_000) }).prefault({}),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    /**
     * serve's request lines. Errors (4xx/5xx) and requests slower than slowMs are always logged;
     * successful ones at most successPerSec a second ('all': every one; 0: none). One line per
     * request was ~12 % of a cached read's CPU.
     */
    requestLog: z
      .object({
        successPerSec: z.union([z.number().int().min(0), z.literal('all')]).default(10),
        slowMs: z.number().int().positive().default(1_000),
      })
      .strict()
      .prefault({}),
    /** Largest accepted request body, in bytes. */
    bodyLimit: z.number().int().positive().default(1_048_576),
    /**
     * Collections (docs/collections.md): what one project may hold. A write past a quota is refused with
     * QuotaExceeded (1200, 429) naming it; bytes are those of the uploaded files its assets point at.
     */
    collections: z
      .object({
        quotas: z
          .object({
            collections: z.number().int().min(0).default(100),
            tokens: z.number().int().min(0).default(100_000),
            assets: z.number().int().min(0).default(100_000),
            links: z.number().int().min(0).default(100),
            bytes: z.number().int().min(0).default(1_073_741_824),
          })
          .strict()
          .prefault({}),
        /** Uploads per project and process: a token bucket (perMinute on average, burst at once); past it RateLimited with Retry-After. */
        uploads: z
          .object({ perMinute: z.number().positive().default(120), burst: z.number().int().min(1).default(30) })
          .strict()
          .prefault({}),
      })
      .strict()
      .prefault({}),
    /**
     * Prometheus metrics. On the API port `/metrics` answers an admin token only (Authorization: Bearer):
     * its counters, sender balances and prices are the operator's. `listen` also serves it without a
     * credential on a second address (`serve` only), for a scraper on a private interface.
     */
    metrics: z
      .object({
        listen: z
          .object({ host: z.string().min(1).default('127.0.0.1'), port: z.number().int().min(0).max(65535) })
          .strict()
          .optional(),
      })
      .strict()
      .prefault({}),
  })
  .strict()
  .superRefine((cfg, ctx) => {
    const seen = new Map<string, number>();
    cfg.chains.forEach((c, i) => {
      for (const key of [String(c.chainId), c.name]) {
        if (seen.has(key)) {
          ctx.addIssue({ code: 'custom', path: ['chains', i], message: `duplicate chain "${key}" (also chains[${seen.get(key)}])` });
        }
        seen.set(key, i);
      }
    });
  });

export type AppConfig = Readonly<z.infer<typeof AppConfigSchema>>;
export type ChainConfig = z.infer<typeof ChainConfigSchema>;
export type IndexerChainConfig = z.infer<typeof IndexerChainConfigSchema>;
export type AppConfigInput = z.input<typeof AppConfigSchema>;
