// metarelay as deployed: real processes of the one binary (`node bin/metarelay.mjs serve|relayer`) on
// one PostgreSQL database, a relayer configured on an anvil with the Sequence v2 contracts and a
// sponsored fee token. Used by the scale-out and soak benches (issue #19).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Address } from 'viem';
import { deploySequenceV2Context } from '../../src/devchain/index.ts';
import { accessKeyRepo } from '../../src/store/access-keys.ts';
import { projectRepo } from '../../src/store/projects.ts';
import { PAYEE, QUOTE_SECRET } from '../../test/support/relayer-env.ts';
import { freePort } from '../../test/support/ports.ts';
import { startTokenChain, type TokenChain } from '../../test/support/token-chain.ts';
import { openBenchDb, progress, type BenchDb, type Cleanup } from './harness.ts';
import { startRelayerOnly, startServe, type ServerProcess } from './processes.ts';
import { anvilKey } from './relayer-load.ts';

/** The cluster's admin token: admin RPCs, and /metrics (which answers an admin token only). */
export const ADMIN_TOKEN = 'bench-admin-token-0123456789';

export interface Cluster {
  chain: TokenChain;
  rpcUrl: string;
  chainId: number;
  token: Address;
  bdb: BenchDb;
  dir: string;
  accessKey: string;
  projectId: number;
  senders: number;
  /** A `serve` process; `dispatch`: with its in-process dispatcher; `gasless`: the chain takes no fee. */
  serve(name: string, dispatch: boolean, gasless?: boolean): Promise<ServerProcess & { relayerUrl: string }>;
  /** A `relayer` process (dispatch only); resolves once it holds a sender lease. */
  relayer(name: string): Promise<ServerProcess>;
  /** Processes holding a live sender lease. */
  leaseHolders(): Promise<number>;
  /** StopSender / StartSender for every sender, through a serve process's admin RPC. */
  switchSenders(relayerUrl: string, on: boolean): Promise<void>;
  sponsorToken(relayerUrl: string): Promise<void>;
}

/** Anvil (automine until the caller switches), the contracts, a fresh PostgreSQL database, a project and key. */
export async function startCluster(cleanup: Cleanup, opts: { senders: number; pollMs?: number }): Promise<Cluster> {
  const chain = await startTokenChain();
  cleanup.add('anvil', () => chain.stop());
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
  const bdb = await openBenchDb('postgres', cleanup);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'metarelay-cluster-'));
  cleanup.add(`remove ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const project = await projectRepo(bdb.db).create('bench');
  const { key } = await accessKeyRepo(bdb.db).create(project.id, 'bench');
  const chainId = chain.chainConfig.chainId;
  if (opts.senders > 8) throw new Error('at most 8 senders (anvil accounts 1..8; 9 does the setup)');

  const config = (dispatch: boolean, gasless = false, every = process.env.BENCH_DISPATCHERS === 'every') => ({
    database: bdb.location,
    allowPrivateNetworks: true,
    logLevel: 'warn',
    inProcessWorker: false,
    admin: { tokens: [ADMIN_TOKEN] },
    relayer: {
      quoteSecret: QUOTE_SECRET,
      inProcessDispatcher: dispatch,
      anonymousRatePerSec: 10_000,
      anonymousBurst: 10_000,
      // Each dispatching process with a share of the senders (relayer.dispatchers): the `relayer` processes
      // (two of them are there for throughput), and with BENCH_DISPATCHERS=every the `serve` ones too.
      ...(every ? { dispatchers: 'every' as const } : {}),
    },
    chains: [
      {
        ...chain.chainConfig,
        watch: false,
        relayer: {
          senderKeys: Array.from({ length: opts.senders }, (_, i) => anvilKey(i + 1)),
          paymentAddress: PAYEE,
          feeTokens: [
            { address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' },
            { address: null, name: 'Ether', symbol: 'ETH', decimals: 18, nativePrice: '1' },
          ],
          gasless,
          pollMs: opts.pollMs ?? 50,
          receiptWaitMs: 3_000,
          // One bench client address and key send everything: their queue shares must not cap a run.
          maxQueuedPerAddress: 1_000_000,
          maxQueuedPerKey: 1_000_000,
        },
      },
    ],
  });
  const files = { on: path.join(dir, 'dispatch.json'), off: path.join(dir, 'api-only.json'), gasless: path.join(dir, 'gasless.json'), relayers: path.join(dir, 'relayers.json') };
  writeFileSync(files.relayers, JSON.stringify(config(true, false, true)));
  writeFileSync(files.on, JSON.stringify(config(true)));
  writeFileSync(files.off, JSON.stringify(config(false)));
  writeFileSync(files.gasless, JSON.stringify(config(true, true)));

  const leaseHolders = async () => {
    const r = await bdb.db.query<{ n: string }>('SELECT count(DISTINCT owner)::text AS n FROM relay_senders WHERE chain_id = $1 AND owner IS NOT NULL AND lease_until > now()', [chainId]);
    return Number(r.rows[0]?.n ?? 0);
  };
  const admin = async (relayerUrl: string, method: string, body: unknown) => {
    const res = await fetch(`${relayerUrl}/rpc/Relayer/${method}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify(body),
    });
    if (!res.ok) throw new Error(`${method}: HTTP ${res.status} ${await res.text()}`);
  };

  return {
    chain,
    rpcUrl: chain.anvil.rpcUrl,
    chainId,
    token,
    bdb,
    dir,
    accessKey: key,
    projectId: project.id,
    senders: opts.senders,
    async serve(name, dispatch, gasless = false) {
      const p = await startServe(gasless ? files.gasless : dispatch ? files.on : files.off, await freePort(), path.join(dir, `${name}.log`));
      cleanup.add(`stop ${name}`, () => p.stop());
      return { ...p, relayerUrl: `${p.baseUrl}/relayer/${chain.chainConfig.name}` };
    },
    async relayer(name) {
      const before = await leaseHolders();
      const p = await startRelayerOnly(files.relayers, path.join(dir, `${name}.log`), async () => (await leaseHolders()) > before);
      cleanup.add(`stop ${name}`, () => p.stop());
      return p;
    },
    leaseHolders,
    async switchSenders(relayerUrl, on) {
      for (let i = 0; i < opts.senders; i++) await admin(relayerUrl, on ? 'StartSender' : 'StopSender', { sender: i });
      progress(`senders ${on ? 'started' : 'stopped'}`);
    },
    async sponsorToken(relayerUrl) {
      await admin(relayerUrl, 'AddGasSponsor', { projectId: project.id, address: token, kind: 'CONTRACT', name: 'bench FUSD' });
    },
  };
}
