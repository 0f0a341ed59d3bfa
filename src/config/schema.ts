import { z } from 'zod';
import { ChainConfigSchema, LogReadsConfigSchema } from './chain-schema.ts';
import { CollectionsConfigSchema } from './collections-schema.ts';
import { ConsoleConfigSchema } from './console-schema.ts';
import { httpUrl } from './fields.ts';
import { IndexerServiceConfigSchema, type IndexerChainConfigSchema } from './indexer-schema.ts';
import { MediaConfigSchema } from './media-schema.ts';
import { MetadataConfigSchema, RefreshConfigSchema, WatcherConfigSchema } from './metadata-schema.ts';
import { RelayerServiceConfigSchema } from './relayer-schema.ts';
import { AdminConfigSchema, AuthConfigSchema, MetricsConfigSchema, PostgresConfigSchema, RequestLogConfigSchema, ShutdownConfigSchema } from './server-schema.ts';
import { WebhooksConfigSchema } from './webhooks-schema.ts';

// The whole config (metarelay.config.json, docs/configuration.md): the top-level settings, each section
// taken from the file of its job (server-, chain-, relayer-, indexer-, metadata-, media-, webhooks-,
// console-, collections-, price-schema.ts), and the rules across sections. The names other modules
// import stay exported from here.

export { ChainConfigSchema } from './chain-schema.ts';
export { IndexerChainConfigSchema } from './indexer-schema.ts';
export { PriceSourceSchema, type ChainPricesConfig } from './price-schema.ts';
export { FeeTokenConfigSchema, RelayerChainConfigSchema } from './relayer-schema.ts';

export const AppConfigSchema = z
  .object({
    port: z.number().int().min(0).max(65535).default(4000),
    host: z.string().min(1).default('127.0.0.1'),
    /** A postgres:// URL, a PGlite data folder, or memory:// (PGlite in memory). */
    database: z.string().min(1).default('./.metarelay/db'),
    postgres: PostgresConfigSchema,
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
    auth: AuthConfigSchema,
    metadata: MetadataConfigSchema,
    refresh: RefreshConfigSchema,
    watcher: WatcherConfigSchema,
    media: MediaConfigSchema,
    logReads: LogReadsConfigSchema,
    indexer: IndexerServiceConfigSchema,
    /** Run the refresh worker and chain watchers inside `serve`/`dev` (`metarelay worker` runs them alone). */
    inProcessWorker: z.boolean().default(true),
    admin: AdminConfigSchema,
    relayer: RelayerServiceConfigSchema,
    webhooks: WebhooksConfigSchema,
    console: ConsoleConfigSchema,
    shutdown: ShutdownConfigSchema,
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    requestLog: RequestLogConfigSchema,
    /** Largest accepted request body, in bytes. */
    bodyLimit: z.number().int().positive().default(1_048_576),
    collections: CollectionsConfigSchema,
    metrics: MetricsConfigSchema,
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
