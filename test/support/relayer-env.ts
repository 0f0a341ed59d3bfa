// A real relayer on a real anvil: the Sequence v2 contracts at their production addresses, a fee token,
// metarelay listening on a port (the official clients need a URL) and its dispatcher running.

import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { createPublicClient, http, parseAbi, type Address, type Hex } from 'viem';
import { deploySequenceV2Context } from '../../src/devchain/index.ts';
import { parseConfig } from '../../src/config/load.ts';
import type { AppConfigInput } from '../../src/config/schema.ts';
import { buildApp } from '../../src/cli/app.ts';
import { createServices, type Services } from '../../src/services.ts';
import { createLogger, type Logger } from '../../src/telemetry/logger.ts';
import { createTestDb, type TestDb } from './db.ts';
import { rpc, OPERATOR_TOKEN } from './service.ts';
import { startTokenChain, type TokenChain } from './token-chain.ts';
import { startRpcProxy, type RpcProxy } from './rpc-proxy.ts';
import { startProviderProxy, type ProviderFaults, type ProviderProxy } from './provider-proxy.ts';

/** anvil's well-known accounts 1 and 2 (account 0 deploys the test contracts). */
export const SENDER_KEYS: Hex[] = ['0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d', '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a'];
export const PAYEE: Address = '0x000000000000000000000000000000000000fee0';
export const QUOTE_SECRET = 'test-quote-secret-0123456789abcdef0123456789';

export const erc20 = parseAbi([
  'function mint(address to, uint256 amount)',
  'function transfer(address to, uint256 amount) returns (bool)',
  'function approve(address spender, uint256 amount) returns (bool)',
  'function balanceOf(address owner) view returns (uint256)',
]);

export type RelayerOverrides = Partial<NonNullable<NonNullable<AppConfigInput['chains']>[number]['relayer']>>;

export interface RelayerEnv {
  chain: TokenChain;
  services: Services;
  app: FastifyInstance;
  testDb: TestDb;
  baseUrl: string;
  relayerUrl: string;
  rpcUrl: string;
  chainId: number;
  token: Address;
  project: { id: number; name: string };
  accessKey: string;
  adminToken: string;
  public: ReturnType<typeof createPublicClient>;
  /** The fault-injecting proxy the service talks to the chain through (with `proxy: true`). */
  proxy?: RpcProxy;
  /** The provider-like proxy (with `provider`); its `proxy` is `proxy` above. */
  provider?: ProviderProxy;
  /** POST to this relayer's webrpc method. */
  call(method: string, body: unknown, headers?: Record<string, string>): Promise<{ status: number; headers: Record<string, unknown>; body: any }>;
  close(): Promise<void>;
}

export interface RelayerEnvOptions {
  relayer?: RelayerOverrides;
  chain?: TokenChain;
  /** Put a fault-injecting JSON-RPC proxy between the service and anvil. */
  proxy?: boolean;
  /** Put a provider-like proxy (test/support/provider-proxy.ts) between the service and anvil, with these faults. */
  provider?: ProviderFaults;
  /** With `proxy`: list anvil itself as a second RPC URL, for failover. */
  failover?: boolean;
  rpcTimeoutMs?: number;
  /** An existing database (e.g. shared by two relayer instances); the caller drops it. */
  testDb?: TestDb;
  /** The service-wide relayer settings (keyless rate limit, receipt waiters); generous by default so tests of other things are not throttled. */
  service?: Partial<NonNullable<AppConfigInput['relayer']>>;
  /** Webhook and approval-webhook settings. */
  webhooks?: AppConfigInput['webhooks'];
  /** The console's settings (its request log, alerts). */
  console?: AppConfigInput['console'];
  /** The services' logger (default: silent, or TEST_LOG's level). */
  log?: Logger;
  /** Index the chain too (chains[].indexer), served at /indexer/<name>; the test drives its follower. */
  indexer?: NonNullable<NonNullable<AppConfigInput['chains']>[number]['indexer']>;
  /** The chain's fee model (default: by chain id, anvil's is `ethereum`). */
  feeModel?: 'ethereum' | 'legacy' | 'opStack' | 'arbitrum';
}

export async function startRelayerEnv(opts: RelayerEnvOptions = {}): Promise<RelayerEnv> {
  const chain = opts.chain ?? (await startTokenChain());
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
  const testDb = opts.testDb ?? (await createTestDb());
  const provider = opts.provider ? await startProviderProxy(chain.anvil.rpcUrl, opts.provider) : undefined;
  const proxy = provider?.proxy ?? (opts.proxy ? await startRpcProxy(chain.anvil.rpcUrl) : undefined);
  const adminToken = 'test-admin-token-0123456789';
  const cfg = parseConfig({
    allowPrivateNetworks: true,
    logLevel: 'silent',
    database: testDb.location,
    admin: { tokens: [adminToken, OPERATOR_TOKEN] },
    ...(opts.webhooks ? { webhooks: opts.webhooks } : {}),
    ...(opts.console ? { console: opts.console } : {}),
    relayer: {
      quoteSecret: QUOTE_SECRET,
      inProcessDispatcher: true,
      anonymousRatePerSec: 10_000,
      anonymousBurst: 10_000,
      // Keyless sends and quotes are charged by the gas they simulate: generous here, held to the shipped
      // bucket by the tests of it (relayer-node-isolation, relayer-keyless-share).
      anonymousSimulationGasPerSec: 1e12,
      anonymousSimulationGasBurst: 1e12,
      ...opts.service,
    },
    chains: [
      {
        ...chain.chainConfig,
        ...(proxy ? { rpcUrls: opts.failover ? [proxy.url, chain.anvil.rpcUrl] : [proxy.url] } : {}),
        ...(opts.rpcTimeoutMs ? { rpcTimeoutMs: opts.rpcTimeoutMs } : {}),
        ...(opts.feeModel ? { feeModel: opts.feeModel } : {}),
        watch: false,
        ...(opts.indexer ? { indexer: opts.indexer } : {}),
        relayer: {
          senderKeys: SENDER_KEYS,
          paymentAddress: PAYEE,
          feeTokens: [
            { address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' },
            { address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' },
          ],
          pollMs: 50,
          receiptWaitMs: 3_000,
          ...opts.relayer,
        },
      },
    ],
  });
  const services = await createServices(cfg, { db: testDb.db, log: opts.log ?? createLogger((process.env.TEST_LOG as 'silent' | undefined) ?? 'silent'), pollingIntervalMs: 50 });
  const app = await buildApp(services);
  await app.listen({ port: 0, host: '127.0.0.1' });
  services.startDispatchers();
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  const project = await services.projects.create(`relay-${Math.random().toString(36).slice(2, 8)}`);
  const { key } = await services.accessKeys.create(project.id, 'test');
  const relayerPath = `/relayer/${chain.chainConfig.name}/rpc/Relayer/`;
  return {
    chain,
    services,
    app,
    testDb,
    baseUrl,
    relayerUrl: `${baseUrl}/relayer/${chain.chainConfig.name}`,
    rpcUrl: chain.anvil.rpcUrl,
    chainId: chain.chainConfig.chainId,
    token,
    project,
    accessKey: key,
    adminToken,
    public: createPublicClient({ transport: http(chain.anvil.rpcUrl), pollingInterval: 50, cacheTime: 0 }),
    proxy,
    provider,
    call: (method, body, headers = {}) => rpc(app, `${relayerPath}${method}`, body, headers),
    async close() {
      // As serve closes: a connection still open half a second after close is cut (a stream's keep-alive
      // socket would otherwise hold the close until its keep-alive timeout).
      const cut = setTimeout(() => app.server.closeAllConnections(), 500);
      await app.close();
      clearTimeout(cut);
      await services.close();
      await proxy?.close();
      if (!opts.testDb) await testDb.drop();
      if (!opts.chain) await chain.stop();
    },
  };
}

/** Adds a sponsorship rule through the admin RPC, as an operator would. */
export async function sponsor(env: RelayerEnv, kind: string, address: string, projectId = env.project.id) {
  const r = await env.call('AddGasSponsor', { projectId, address, kind, name: `${kind} ${address}` }, { authorization: `Bearer ${env.adminToken}` });
  if (r.status !== 200) throw new Error(`AddGasSponsor failed: ${JSON.stringify(r.body)}`);
  return r.body.gasSponsor as { id: number };
}
