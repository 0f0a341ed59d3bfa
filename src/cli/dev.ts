import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { AddressInfo } from 'node:net';
import { parseConfig } from '../config/load.ts';
import { startDevChain } from '../devchain/index.ts';
import { buildApp } from '../http/app.ts';
import { createServices, type Services } from '../services.ts';
import { createLogger } from '../telemetry/logger.ts';
import { tokenStore } from '../metadata/token-store.ts';
import { parse, portFlag } from './args.ts';
import { devBanner } from './dev-banner.ts';
import { onShutdown } from './shutdown.ts';

export interface DevManifest {
  baseUrl: string;
  accessKey: string;
  project: string;
  chain: { chainId: number; name: string; rpcUrl: string };
  contracts: Record<string, string>;
  tokens: Record<string, string[]>;
  originUrl: string;
}

/** Reuses the dev key from the last manifest while it is still live: keys are stored hashed, so it cannot be re-read. */
async function devAccessKey(s: Services, manifestPath: string): Promise<{ key: string; project: string }> {
  const projectName = 'dev';
  const project = (await s.projects.getByName(projectName)) ?? (await s.projects.create(projectName));
  if (existsSync(manifestPath)) {
    try {
      const prev = JSON.parse(readFileSync(manifestPath, 'utf8')) as Partial<DevManifest>;
      if (typeof prev.accessKey === 'string') {
        const live = await s.accessKeys.resolve(prev.accessKey);
        if (live && live.project.id === project.id) return { key: prev.accessKey, project: projectName };
      }
    } catch {
      /* an unreadable manifest just means a new key */
    }
  }
  const { key } = await s.accessKeys.create(project.id, 'dev');
  return { key, project: projectName };
}

export async function runDev(argv: string[]) {
  const t0 = performance.now();
  const { values } = parse(argv, {
    port: { type: 'string' },
    host: { type: 'string' },
    manifest: { type: 'string' },
    data: { type: 'string' },
  });
  const dataDir = resolve(values.data ?? '.metarelay');
  const manifestPath = resolve(values.manifest ?? `${dataDir}/dev.json`);
  const port = portFlag(values.port) ?? portFlag(process.env.PORT) ?? 4000;
  const host = values.host ?? '127.0.0.1';
  mkdirSync(dataDir, { recursive: true });
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn');

  const say = (msg: string) => process.stdout.write(`${msg}\n`);
  say('metarelay dev: starting a local anvil chain and deploying sample contracts…');
  const chain = await startDevChain({ cacheDir: `${dataDir}/cache`, log: (m) => say(`  ${m}`) });

  let services: Services | undefined;
  try {
    const config = parseConfig({
      port,
      host,
      database: process.env.DATABASE_URL ?? `${dataDir}/db`,
      chains: [{ chainId: chain.manifest.chain.chainId, name: chain.manifest.chain.name, rpcUrls: [chain.manifest.chain.rpcUrl] }],
      // The dev origin server lives on 127.0.0.1: dev mode must be allowed to fetch from it.
      allowPrivateNetworks: true,
      // A developer iterating on metadata wants every refresh to run, and events seen at once.
      refresh: { coolOffSec: 0 },
      watcher: { confirmations: 0, pollMs: 1_000 },
      logLevel: process.env.LOG_LEVEL ?? 'warn',
    }, 'dev config');
    services = await createServices(config, { log, pollingIntervalMs: 250 });
    // The chain is new on every start: what the database cached about the last one no longer holds.
    await tokenStore(services.db).forgetChain(chain.manifest.chain.chainId);
    const { key, project } = await devAccessKey(services, manifestPath);
    const app = await buildApp(services);
    await app.listen({ port: config.port, host: config.host });
    services.startBackground();
    const bound = (app.server.address() as AddressInfo).port;
    const baseUrl = `http://${config.host}:${bound}`;

    const manifest: DevManifest = {
      baseUrl,
      accessKey: key,
      project,
      chain: chain.manifest.chain,
      contracts: chain.manifest.contracts,
      tokens: chain.manifest.tokens,
      originUrl: chain.origin.url,
    };
    mkdirSync(dirname(manifestPath), { recursive: true });
    writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    say(devBanner({ manifest, manifestPath, database: config.database, seconds: (performance.now() - t0) / 1000 }));

    const svc = services;
    onShutdown(log, async () => {
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
