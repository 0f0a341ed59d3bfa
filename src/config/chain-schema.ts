import { z } from 'zod';
import { Address, httpUrl } from './fields.ts';
import { IndexerChainConfigSchema } from './indexer-schema.ts';
import { ChainPricesConfigSchema } from './price-schema.ts';
import { RelayerChainConfigSchema } from './relayer-schema.ts';

// The config of one chain (its nodes, block time, fee model, and what runs on it: watcher, relayer,
// indexer, prices), and how the indexer and the watcher read its logs.

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

/** Log reads of the indexer and the metadata watcher (docs/indexer.md, "Blocks too big to read"). */
export const LogReadsConfigSchema = z
  .object({
    /** Polls in a row a single block's logs may fail to be read (even split) before it is flagged and passed over. */
    blockAttempts: z.number().int().min(1).max(1_000).default(5),
    /** A passed-over block is read again after this long, then after twice as long each time it fails (up to 64×). */
    retrySec: z.number().int().min(0).default(300),
  })
  .prefault({});
