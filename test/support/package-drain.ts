// A drain under load of `metarelay serve` run from the installed tarball (test/package.test.ts): sponsored
// meta-transactions broadcast and not mined (anvil's automine off) with receipt long polls held on them,
// more sends streaming in and status reads going on when SIGTERM arrives. What must hold: the process
// exits 0 (inside shutdown.deadlineMs, else it exits 1) and frees the port, every held poll is answered,
// a send is either accepted (200) or refused retryably (503), and every accepted meta-transaction is in
// the database and, once a second serve runs with the node mining, succeeds on chain exactly once; and,
// on a machine not overloaded, SIGTERM to exit within 3 s.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';
import { createPublicClient, http, type Address } from 'viem';
import { deploySequenceV2Context } from '../../src/devchain/index.ts';
import { sponsorRepo } from '../../src/relayer/intake/sponsors.ts';
import { accessKeyRepo } from '../../src/store/access-keys.ts';
import { openDb } from '../../src/store/db.ts';
import { projectRepo } from '../../src/store/projects.ts';
import { mine, setAutomine } from './anvil-control.ts';
import { createTestDb } from './db.ts';
import { TEST_DB } from './env.ts';
import { freePort } from './ports.ts';
import { cleanEnv, type InstalledApp } from './package.ts';
import { deployWallets, mintBundles, type LoadItem } from './relay-load.ts';
import { PAYEE, QUOTE_SECRET, SENDER_KEYS, erc20, type RelayerEnv } from './relayer-env.ts';
import { startTokenChain } from './token-chain.ts';

/** Broadcast and held before the signal (their receipt polls are open at it). */
const HELD = 12;
/** Sent while the drain begins, four at a time. */
const STREAMED = 16;

function serve(installed: InstalledApp, cfg: string) {
  const child = spawn(process.execPath, [installed.bin, 'serve', '--config', cfg], { cwd: installed.app, env: cleanEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
  return { child, exited, output: () => out };
}

async function until<T>(what: string, fn: () => Promise<T | undefined>, out: () => string): Promise<T> {
  for (let i = 0; ; i++) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    if (i > 1_200) throw new Error(`${what} did not happen:\n${out().slice(-4000)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function drainUnderLoad(installed: InstalledApp): Promise<void> {
  const chain = await startTokenChain();
  const testDb = await createTestDb();
  try {
    await deploySequenceV2Context(chain.anvil.rpcUrl);
    const [token] = await chain.deploy([{ contract: 'DevERC20', args: ['Fee USD', 'FUSD'] }]);
    const project = await projectRepo(testDb.db).create('drain-under-load');
    const accessKey = (await accessKeyRepo(testDb.db).create(project.id, 'load')).key;
    await sponsorRepo(testDb.db).add({ projectId: project.id, chainId: chain.chainConfig.chainId, kind: 'CONTRACT', address: token!.toLowerCase() as Address, name: 'token', active: true });
    const pub = createPublicClient({ transport: http(chain.anvil.rpcUrl), cacheTime: 0 });
    const env = { rpcUrl: chain.anvil.rpcUrl, public: pub, chainId: chain.chainConfig.chainId, token, services: { db: testDb.db } } as unknown as RelayerEnv;
    const users = await deployWallets(env, HELD + STREAMED);
    const items = await mintBundles(env, users, 1);
    await setAutomine(chain.anvil.rpcUrl, false);
    if (TEST_DB === 'pglite') await testDb.db.close();

    const port = await freePort();
    const cfg = join(installed.app, 'drain.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        port,
        database: testDb.location,
        allowPrivateNetworks: true,
        logLevel: 'info',
        relayer: { quoteSecret: QUOTE_SECRET },
        chains: [
          {
            ...chain.chainConfig,
            watch: false,
            relayer: { senderKeys: SENDER_KEYS, paymentAddress: PAYEE, feeTokens: [{ address: token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' }], pollMs: 50 },
          },
        ],
      }),
    );
    const base = `http://127.0.0.1:${port}/relayer/${chain.chainConfig.name}/rpc/Relayer/`;
    const post = (method: string, body: unknown) =>
      fetch(base + method, { method: 'POST', headers: { 'content-type': 'application/json', 'x-access-key': accessKey }, body: JSON.stringify(body) }).then(async (r) => ({
        status: r.status,
        body: (await r.json()) as any,
      }));
    const send = (item: LoadItem) => post('SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } });

    const srv = serve(installed, cfg);
    const accepted = new Map<string, LoadItem>();
    let exitMs = 0;
    try {
      await until('serve ready', async () => ((await fetch(`http://127.0.0.1:${port}/ready`)).status === 200 ? true : undefined), srv.output);
      // Broadcast, not mined: each receipt poll is held (receiptWaitMs, 15 s by default) at the signal.
      for (const item of items.slice(0, HELD)) {
        const r = await send(item);
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        accepted.set(r.body.txnHash, item);
      }
      await until(
        'the held meta-transactions broadcast',
        async () => ((await Promise.all([...accepted.keys()].map((id) => post('GetMetaTxnStatus', { metaTxID: id })))).every((r) => r.body.status === 'SENT') ? true : undefined),
        srv.output,
      );
      const polls = [...accepted.keys()].map((id) => post('GetMetaTxnReceipt', { metaTxID: id }));
      // Status readers and the streamed sends run through the signal.
      let loading = true;
      const readers = Array.from({ length: 4 }, async (_, i) => {
        while (loading) if (!(await post('GetMetaTxnStatus', { metaTxID: [...accepted.keys()][i] }).catch(() => undefined))) break;
      });
      const refused: LoadItem[] = [];
      let next = HELD;
      let signalAt = 0;
      let loadAtSignal = 0;
      const signal = () => {
        signalAt = performance.now();
        loadAtSignal = loadavg()[0];
        srv.child.kill('SIGTERM');
      };
      let signalled = false;
      const senders = Array.from({ length: 4 }, async () => {
        while (next < items.length) {
          const item = items[next++];
          // The signal lands with sends in flight: after a quarter of them were answered.
          if (!signalled && next - HELD > STREAMED / 4) {
            signalled = true;
            signal();
          }
          const r = await send(item).catch(() => undefined);
          if (r?.status === 200) accepted.set(r.body.txnHash, item);
          // Refused by the draining process (or its port already closed): never stored, retried elsewhere.
          else if (!r || r.status === 503) refused.push(item);
          else throw new Error(`SendMetaTxn answered ${r.status}: ${JSON.stringify(r.body)}`);
        }
      });
      await Promise.all(senders);
      const code = await srv.exited;
      exitMs = Math.round(performance.now() - signalAt);
      loading = false;
      await Promise.all(readers);
      // Exit 0: drained inside shutdown.deadlineMs (30 s; past it the process exits 1).
      expect(code, srv.output().slice(-4000)).toBe(0);
      await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
      for (const p of await Promise.all(polls)) expect(p.status).toBe(200);
      expect(accepted.size + refused.length).toBe(items.length);
      console.log(
        `drain under load from the installed package (${TEST_DB}): SIGTERM to exit ${exitMs} ms (load average ${loadAtSignal.toFixed(1)} on ${cpus().length} cores), ${accepted.size} sends accepted, ${refused.length} refused with 503`,
      );
      // Within 3 s (graceMs 2 s, then HTTP and the database closed): judged while the machine has a
      // core for each runnable process; past that, CPU starvation, not the drain, sets the time.
      if (loadAtSignal <= cpus().length) expect(exitMs, `SIGTERM to exit at load average ${loadAtSignal.toFixed(1)}`).toBeLessThan(3_000);
      else console.log(`the 3 s bound not judged: load average ${loadAtSignal.toFixed(1)} > ${cpus().length} cores`);
    } finally {
      if (srv.child.exitCode === null) srv.child.kill('SIGKILL');
    }

    // Every accepted meta-transaction is in the database.
    const db = TEST_DB === 'pglite' ? await openDb(testDb.location) : testDb.db;
    try {
      const rows = await db.query<{ id: string }>('SELECT id FROM meta_txns WHERE chain_id = $1', [chain.chainConfig.chainId]);
      const stored = new Set(rows.rows.map((r) => r.id));
      for (const id of accepted.keys()) expect(stored.has(id.replace(/^0x/, '')), id).toBe(true);
    } finally {
      if (TEST_DB === 'pglite') await db.close();
    }

    // A second serve with the node mining finishes them: each accepted mint happens once, no refused one.
    await setAutomine(chain.anvil.rpcUrl, true);
    await mine(chain.anvil.rpcUrl);
    const again = serve(installed, cfg);
    try {
      await until(
        'every accepted meta-transaction to succeed',
        async () => {
          const s = await Promise.all([...accepted.keys()].map((id) => post('GetMetaTxnStatus', { metaTxID: id })));
          return s.every((r) => r.body.status === 'SUCCEEDED') ? true : undefined;
        },
        again.output,
      );
      for (const item of items) {
        const minted = await pub.readContract({ address: token!, abi: erc20, functionName: 'balanceOf', args: [item.user.wallet.address] });
        expect(minted, item.user.wallet.address).toBe([...accepted.values()].includes(item) ? 1n : 0n);
      }
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
  } finally {
    await testDb.drop().catch(() => undefined);
    await chain.stop();
  }
}
