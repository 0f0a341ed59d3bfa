import type { KeyKind } from '../store/access-keys.ts';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../config/load.ts';
import { deployDelegatedWallet, startDevChain } from '../devchain/index.ts';
import { deployPriceFeeds, PRICE_ADMIN_KEY } from '../devchain/prices.ts';
import { buildApp } from './app.ts';
import { createServices, type Services } from '../services.ts';
import { createLogger } from '../telemetry/logger.ts';
import { tokenStore } from '../metadata/tokens/token-store.ts';
import { mintMonitorStore } from '../metadata/refresh/mint-monitors.ts';
import { forgetRelayerChain } from '../relayer/forget-chain.ts';
import { forgetIndexedChain } from '../indexer/index.ts';
import { randomBytes } from 'node:crypto';
import { privateKeyToAccount } from 'viem/accounts';
import type { Address } from 'viem';
import { devBanner, type DevServiceManifest } from './dev-banner.ts';

export type { DevServiceManifest } from './dev-banner.ts';
import { devAdminToken } from '../console/dev-token.ts';
import { onShutdown } from './shutdown.ts';
import { listenOn } from './port.ts';
import { devCollection } from './dev-collection.ts';

/** What `metarelay dev` was asked for (dev-command.ts parses it before loading this module). */
export interface DevOptions {
  dataDir: string;
  manifestPath: string;
  port: number;
  host: string;
  /** performance.now() at the command's start, for the banner's start-up time. */
  startedAt: number;
}

// anvil's well-known accounts: 1-3 send relayed transactions, 9 collects fees, 5-7 sign test wallets.
const ANVIL_KEYS = {
  senders: [
    '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
    '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
    '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  ],
  feeCollector: '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6',
  signers: [
    '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
    '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
    '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  ],
} as const;

/** The dev project sponsors every sample contract, so a new wallet can transact at once without funds. */
async function sponsorSamples(s: Services, projectId: number, chainId: number, contracts: Record<string, string>) {
  const existing = new Set((await s.sponsors.list(projectId, chainId)).map((r) => `${r.kind}:${r.address}`));
  for (const [name, address] of Object.entries(contracts)) {
    if (existing.has(`CONTRACT:${address.toLowerCase()}`)) continue;
    await s.sponsors.add({ projectId, chainId, kind: 'CONTRACT', address: address as Address, name: `dev sample ${name}`, active: true });
  }
}

/** The last run's manifest, for the secrets it handed out; nothing when there is none or it is unreadable. */
function previousManifest(manifestPath: string): Partial<DevServiceManifest> {
  if (!existsSync(manifestPath)) return {};
  try {
    return JSON.parse(readFileSync(manifestPath, 'utf8')) as Partial<DevServiceManifest>;
  } catch {
    return {};
  }
}

/** Reuses the last run's dev key while it is still live: keys are stored hashed, so it cannot be re-read. */
/** The sample contracts make up the dev chain's token directory, the ERC721 collection featured. */
async function listSamples(s: Services, chainId: number, contracts: Record<string, string>) {
  const lower = (a: string) => a.toLowerCase() as Address;
  await s.directory.add(chainId, Object.values(contracts).map(lower));
  await s.directory.setFeatureIndex(chainId, lower(contracts.erc721!), 1);
}

async function devAccessKey(s: Services, previous: unknown, kind: KeyKind): Promise<string> {
  const projectName = 'dev';
  const project = (await s.projects.getByName(projectName)) ?? (await s.projects.create(projectName));
  if (typeof previous === 'string') {
    const live = await s.accessKeys.resolve(previous);
    if (live && live.project.id === project.id && live.keyKind === kind) return previous;
  }
  const { key } = await s.accessKeys.create(project.id, kind === 'secret' ? 'dev (secret)' : 'dev', { kind });
  return key;
}

/** `metarelay dev` once its arguments are read and its port is known to be free (dev-command.ts). */
export async function startDev(o: DevOptions) {
  const t0 = o.startedAt;
  const { dataDir, manifestPath, port, host } = o;
  mkdirSync(dataDir, { recursive: true });
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn');

  const say = (msg: string) => process.stdout.write(`${msg}\n`);
  say('metarelay dev: starting a local anvil chain and deploying sample contracts…');
  // Until the service is up, a signal ends the start at once through process.exit, whose exit hook kills
  // anvil (devchain/anvil.ts). Node's own default for SIGINT/SIGTERM ends the process without that hook:
  // anvil, a child with pipes of its own, outlived a stop sent to this process alone mid-start (`kill
  // <pid>`, a service manager's stop), still running after its parent had gone.
  const stopStarting = (signal: NodeJS.Signals) => process.exit(signal === 'SIGINT' ? 130 : 143);
  process.once('SIGINT', stopStarting);
  process.once('SIGTERM', stopStarting);
  const endStartGuard = () => {
    process.off('SIGINT', stopStarting);
    process.off('SIGTERM', stopStarting);
  };
  const chain = await startDevChain({ cacheDir: `${dataDir}/cache`, log: (m) => say(`  ${m}`) });

  let services: Services | undefined;
  try {
    // DUSD at $1 and ETH at $2 000: a fee of 100 000 gas at 1 gwei is 0.0001 ETH, or 0.2 DUSD (before the markup).
    const feeds = await deployPriceFeeds({
      rpcUrl: chain.manifest.chain.rpcUrl,
      chainId: chain.manifest.chain.chainId,
      artifacts: chain.artifacts,
      token: chain.manifest.contracts.erc20,
      tokenDecimals: 6,
      log: (m) => say(`  ${m}`),
    });
    const delegatedWallet = await deployDelegatedWallet(chain.manifest.chain.rpcUrl, chain.artifacts);
    const config = parseConfig(
      {
        port,
        host,
        database: process.env.DATABASE_URL ?? `${dataDir}/db`,
        chains: [
          {
            chainId: chain.manifest.chain.chainId,
            name: chain.manifest.chain.name,
            rpcUrls: [chain.manifest.chain.rpcUrl],
            relayer: {
              senderKeys: [...ANVIL_KEYS.senders],
              paymentAddress: privateKeyToAccount(ANVIL_KEYS.feeCollector).address,
              feeTokens: [
                {
                  address: chain.manifest.contracts.erc20,
                  name: 'Dev USD',
                  symbol: 'DUSD',
                  decimals: 6,
                  // No fixed fallback: with both sources failing DUSD is withdrawn, as it would be in production.
                  prices: [
                    { kind: 'chainlink', feed: feeds.tokenUsd, quote: 'usd', heartbeatSec: 86_400 },
                    { kind: 'uniswapV3', pool: feeds.pool, windowSec: 60 },
                  ],
                },
                { address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' },
              ],
              pollMs: 250,
              nativeUsdFeed: { feed: feeds.nativeUsd, heartbeatSec: 86_400 },
              wrappedNative: feeds.wrappedNative,
              delegatedWallets: [delegatedWallet],
            },
            // A local chain is small: index every contract from its first block.
            indexer: { scope: 'all', fromBlock: 0, confirmations: 0, pollMs: 500 },
            // USD prices of balances and the price methods, from the same dev feeds and pool as the fees.
            prices: {
              nativeUsdFeed: { feed: feeds.nativeUsd, heartbeatSec: 86_400 },
              wrappedNative: feeds.wrappedNative,
              tokens: [
                {
                  address: chain.manifest.contracts.erc20,
                  symbol: 'DUSD',
                  decimals: 6,
                  prices: [
                    { kind: 'chainlink', feed: feeds.tokenUsd, quote: 'usd', heartbeatSec: 86_400 },
                    { kind: 'uniswapV3', pool: feeds.pool, windowSec: 60 },
                  ],
                },
              ],
            },
          },
        ],
        // Quotes live minutes; a new secret per start only invalidates quotes of the previous run.
        relayer: { quoteSecret: randomBytes(32).toString('hex') },
        // The dev origin server lives on 127.0.0.1: dev mode must be allowed to fetch from it.
        allowPrivateNetworks: true,
        // A developer iterating on metadata wants every refresh to run, and events seen at once.
        refresh: { coolOffSec: 0 },
        watcher: { confirmations: 0, pollMs: 1_000 },
        logLevel: process.env.LOG_LEVEL ?? 'warn',
      },
      'dev config',
    );
    services = await createServices(config, { log, pollingIntervalMs: 250 });
    // The chain is new on every start: what the database cached about the last one no longer holds.
    await tokenStore(services.db).forgetChain(chain.manifest.chain.chainId);
    await services.media?.forgetChain(chain.manifest.chain.chainId);
    await forgetRelayerChain(services.db, chain.manifest.chain.chainId);
    await forgetIndexedChain(services.db, chain.manifest.chain.chainId);
    await services.collections?.forgetChain(chain.manifest.chain.chainId);
    await mintMonitorStore(services.db).forgetChain(chain.manifest.chain.chainId);
    const previous = previousManifest(manifestPath);
    // A publishable key for apps and a secret one for what writes (collections, webhook listeners).
    const project = 'dev';
    const key = await devAccessKey(services, previous.accessKey, 'publishable');
    const secretKey = await devAccessKey(services, previous.secretKey, 'secret');
    const adminToken = await devAdminToken(services.db, previous.adminToken);
    const devProject = (await services.projects.getByName(project))!;
    await sponsorSamples(services, devProject.id, chain.manifest.chain.chainId, chain.manifest.contracts);
    await listSamples(services, chain.manifest.chain.chainId, chain.manifest.contracts);
    // Ready once the manifest is written (below): a script that waits for /ready reads this run's.
    let started = false;
    const app = await buildApp(services, { started: () => started });
    await listenOn(app, config.host, config.port);
    services.startApi();
    services.startBackground();
    services.startDispatchers();
    const bound = (app.server.address() as AddressInfo).port;
    const baseUrl = `http://${config.host}:${bound}`;
    // After listening: the collection's URLs name the address the service answers on.
    const collection =
      services.collections &&
      (await devCollection({
        collections: services.collections,
        projectId: devProject.id,
        rpcUrl: chain.manifest.chain.rpcUrl,
        chainId: chain.manifest.chain.chainId,
        artifacts: chain.artifacts,
        holder: privateKeyToAccount(ANVIL_KEYS.signers[0]).address,
      }));

    const manifest: DevServiceManifest = {
      baseUrl,
      accessKey: key,
      secretKey,
      project,
      chain: chain.manifest.chain,
      contracts: chain.manifest.contracts,
      tokens: chain.manifest.tokens,
      originUrl: chain.origin.url,
      relayerUrl: `${baseUrl}/relayer/${chain.manifest.chain.name}`,
      indexerUrl: `${baseUrl}/indexer/${chain.manifest.chain.name}`,
      holder: chain.manifest.deployer,
      sequenceContext: chain.manifest.sequenceContext,
      delegatedWallet,
      feeToken: { address: chain.manifest.contracts.erc20, symbol: 'DUSD', decimals: 6 },
      priceFeeds: { ethUsd: feeds.nativeUsd, dusdUsd: feeds.tokenUsd, pool: feeds.pool, wrappedNative: feeds.wrappedNative, poolHelper: feeds.helper, adminKey: PRICE_ADMIN_KEY },
      testSigners: ANVIL_KEYS.signers.map((k) => ({ privateKey: k, address: privateKeyToAccount(k).address })),
      consoleUrl: `${baseUrl}/console/`,
      adminToken,
      ...(collection ? { collection } : {}),
    };
    mkdirSync(dirname(manifestPath), { recursive: true });
    writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    started = true;
    say(devBanner({ manifest, manifestPath, database: config.database, seconds: (performance.now() - t0) / 1000 }));

    const svc = services;
    endStartGuard();
    onShutdown(log, async () => {
      // A Ctrl-C reached anvil too (one process group): its exit now is part of this stop.
      chain.anvil.expectExit();
      say('metarelay dev: stopping…');
      await app.close();
      await svc.close();
      await chain.stop();
    });
  } catch (err) {
    await services?.close().catch(() => undefined);
    await chain.stop();
    throw err;
  }
}
