// `metarelay dev` as a newcomer meets it (`npm start` in a fresh clone): the first start on an empty
// folder (solc compiles every contract, the database is created), the quick-start calls its banner
// prints, SIGTERM, and the next starts on the same folder.
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../src/store/db.ts';
import { runNode } from './support/cli.ts';
import { devFolder, ready, type DevFolder } from './support/dev.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: res.status, body: await res.json() };
}

async function rpcAnswers(rpcUrl: string): Promise<boolean> {
  try {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      signal: AbortSignal.timeout(1000),
    });
    return res.ok;
  } catch {
    return false;
  }
}

describe(`metarelay dev (${TEST_DB})`, () => {
  // A newcomer's folder: nothing in it (the later starts find what the first left).
  let folder: DevFolder;
  let manifestPath: string;
  beforeAll(async () => {
    folder = await devFolder({ newcomer: true });
    manifestPath = folder.manifestPath;
  });
  afterAll(async () => {
    await folder?.remove();
  });

  it('starts chain and service, writes the manifest, answers the quick-start calls, and stops everything on SIGTERM', async () => {
    const dev = folder.start();
    try {
      // A newcomer's first start: solc compiles every contract cold (its cache is in the fresh data
      // folder). That took 65 s on a machine at load 19, and 202 s at load 13 beside other compiles
      // (before global-setup compiled first), so the wait is generous: it bounds a hang.
      await ready(dev, 360_000);
      // What the first-run message promises (~20 s on two idle cores, minutes under load), as measured: a figure, not an assertion.
      expect(dev.output()).toMatch(/first run only: ~20 s on two idle cores, minutes on a loaded machine/);
      const compiled = dev.output().match(/compiled (\d+) contracts with solc \S+ in (\d+) ms/);
      console.log(`metarelay dev, first run: compiled ${compiled?.[1]} contracts in ${compiled?.[2]} ms (load average ${(await import('node:os')).loadavg()[0].toFixed(1)})`);
      const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
      expect(m).toMatchObject({
        baseUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        accessKey: expect.stringMatching(/^mr_/),
        chain: { chainId: 31337, name: 'anvil', rpcUrl: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/) },
        tokens: { erc721: ['1', '2', '3'], erc721OnChain: ['1'], erc1155: ['1', '2'] },
      });
      for (const k of ['erc20', 'erc721', 'erc721OnChain', 'erc1155']) expect(m.contracts[k]).toMatch(/^0x[0-9a-fA-F]{40}$/);
      expect(dev.output()).toContain(m.accessKey);
      // The banner's copy-paste examples work as printed.
      const restLine = dev.output().match(/curl -s (http:\S+\/tokens\/\S+)/);
      expect(restLine).not.toBeNull();
      const rest = await fetch(restLine![1]);
      expect(rest.status).toBe(200);
      const restBody = await rest.json();
      expect(restBody.map((t: { tokenId: string; status: string }) => [t.tokenId, t.status])).toEqual([
        ['1', 'AVAILABLE'],
        ['2', 'AVAILABLE'],
        ['3', 'AVAILABLE'],
      ]);
      expect(restBody[0].name).toBe('Dev ERC721 #1');
      const rpcLine = dev.output().match(/GetTokenMetadata .*-H 'X-Access-Key: (\S+)' -d '(\{"chainID".*\})'/);
      expect(rpcLine).not.toBeNull();
      const rpcRes = await post(`${m.baseUrl}/rpc/Metadata/GetTokenMetadata`, JSON.parse(rpcLine![2]), { 'X-Access-Key': rpcLine![1] });
      expect(rpcRes.status).toBe(200);
      expect(rpcRes.body.tokenMetadata.map((t: { name: string }) => t.name)).toEqual(['Dev ERC1155 #1', 'Dev ERC1155 #2']);
      const onChain = await post(`${m.baseUrl}/rpc/Metadata/GetTokenMetadata`, { chainID: '31337', contractAddress: m.contracts.erc721OnChain, tokenIDs: ['1'] }, { 'X-Access-Key': m.accessKey });
      expect(onChain.body.tokenMetadata[0]).toMatchObject({ name: 'OnChain #1', status: 'AVAILABLE', image: expect.stringMatching(/^data:image\/svg\+xml/) });

      // The relayer quick-start: the banner's command for the gasless example, run as printed (with the
      // manifest this start wrote, given by --manifest), relays a gasless transaction from a new wallet.
      expect(m.relayerUrl).toBe(`${m.baseUrl}/relayer/anvil`);
      const hint = dev.output().match(/^ {2}METARELAY_MANIFEST=(\S+) node (\S+) {3}\(/m);
      expect(hint, "the banner gives the example's command").not.toBeNull();
      expect(resolve(hint![1])).toBe(resolve(manifestPath));
      const example = await runNode([hint![2]], { METARELAY_MANIFEST: hint![1] });
      expect(example.code, example.stderr).toBe(0);
      expect(example.stdout).toMatch(/ETH balance 0\n/);
      expect(example.stdout).toMatch(/wallet holds 3750000 base units of DUSD, recipient 0x[0-9a-fA-F]{40} holds 1250000/);

      // EIP-7702: the wallet implementation delegated EOAs use is deployed, and it is the one the relayer accepts.
      const implCode = await post(m.chain.rpcUrl, { jsonrpc: '2.0', id: 1, method: 'eth_getCode', params: [m.delegatedWallet, 'latest'] });
      expect(implCode.body.result.length).toBeGreaterThan(2_000);
      const stranger = `0x${'77'.repeat(20)}`;
      const refused = await post(`${m.relayerUrl}/rpc/Relayer/SendMetaTxn`, {
        call: {
          walletAddress: stranger,
          contract: stranger,
          input: '0x7a9a1628' + '60'.padStart(64, '0') + '0'.repeat(64) + '80'.padStart(64, '0') + '0'.repeat(128),
          authorization: { chainId: 31337, implementation: stranger, nonce: 0, signature: `0x${'11'.repeat(65)}` },
        },
      });
      expect(refused.body.cause).toContain(`accepted: ${m.delegatedWallet}`);

      // DUSD is priced live from the dev chain's Chainlink feeds ($1 / $2 000 per ETH).
      const relayerStatus = await post(`${m.relayerUrl}/rpc/Relayer/RuntimeStatus`, {}, { 'X-Access-Key': m.accessKey });
      expect(relayerStatus.body.status.prices[0]).toMatchObject({ symbol: 'DUSD', ok: true, nativePrice: '0.0005', source: 'chainlink', address: m.priceFeeds.dusdUsd });

      expect(await post(`${m.baseUrl}/rpc/Metadata/Ping`, {})).toEqual({ status: 200, body: { status: true } });
      const get = await fetch(`${m.baseUrl}/rpc/Metadata/Ping`);
      expect(get.status).toBe(405);
      const anon = await post(`${m.baseUrl}/rpc/Metadata/RuntimeStatus`, {});
      expect(anon).toMatchObject({ status: 401, body: { error: 'Unauthorized', code: 1000 } });
      const keyed = await post(`${m.baseUrl}/rpc/Metadata/RuntimeStatus`, {}, { 'X-Access-Key': m.accessKey });
      expect(keyed.status).toBe(200);
      expect(keyed.body.status.runnable['chain:anvil'].running).toBe(true);
      expect((await fetch(`${m.baseUrl}/ready`)).status).toBe(200);

      // The console: its page is served, and the printed admin token signs in to it.
      const page = await fetch(m.consoleUrl);
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('<div id="app">');
      const signIn = await post(`${m.baseUrl}/rpc/Console/SignIn`, { token: m.adminToken });
      expect(signIn.status).toBe(200);

      expect(await rpcAnswers(m.chain.rpcUrl)).toBe(true);
      const code = await dev.stop('SIGTERM');
      expect(code).toBe(0);
      // anvil went down with it
      expect(await rpcAnswers(m.chain.rpcUrl)).toBe(false);
    } finally {
      await dev.stop('SIGKILL');
    }
  }, 450_000);

  /** The dev database while dev is stopped (PGlite: the folder is free only then). */
  async function withDevDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    if (folder.testDb) return fn(folder.testDb.db);
    const db = await openDb(join(folder.data, 'db'));
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  }

  /**
   * What a killed run on the previous dev chain leaves in the dev database (dev stopped): a queued and a
   * sent meta-transaction, a bundle, a signed transaction, a sender ledger and an instance, on the dev
   * chain and on another chain of the same database, and a sponsorship rule of the dev project. The
   * next start (the `npm start` test's) must forget the dev chain's queue and keep the rest: checked by
   * the test after it, which so needs no start of its own (a dev start is ~3 s of CPU).
   */
  let seeded: Awaited<ReturnType<typeof seedPreviousQueue>> | undefined;
  const other = 137; // another chain in the same database: not the dev chain, so left alone
  const id = 'ab'.repeat(32);
  const ghost = `0x${'de'.repeat(20)}`;
  const sponsorRule = `0x${'5e'.repeat(20)}`;
  const rowsOf = (db: Db, chainId: number) =>
    Promise.all(
      ['meta_txns', 'meta_txn_bundles', 'relay_txs', 'relay_senders', 'relay_instances'].map(async (table) => {
        const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE chain_id = $1`, [chainId]);
        return [table, r.rows[0]!.n] as const;
      }),
    ).then(Object.fromEntries);
  async function seedPreviousQueue() {
    const devChain = JSON.parse(readFileSync(manifestPath, 'utf8')).chain.chainId as number;
    const before = await withDevDb(async (db) => {
      const project = (await db.query<{ id: number }>(`SELECT id FROM projects WHERE name = 'dev'`)).rows[0]!.id;
      await db.query(`INSERT INTO gas_sponsors (project_id, chain_id, kind, address, name) VALUES ($1, $2, 'WALLET', $3, 'kept')`, [project, devChain, sponsorRule]);
      for (const chainId of [devChain, other]) {
        // A queued meta-transaction, one signed but not yet mined, and a sender ledger: what a killed run leaves.
        await db.query(
          `INSERT INTO meta_txns (chain_id, id, wallet, entrypoint, input, status, gas_limit, gas_estimated, sender, txn_nonce)
           VALUES ($1, $2, $3, $3, '0x', 'SENT', 100000, 90000, $3, 7), ($1, $4, $3, $3, '0x', 'QUEUED', 100000, 90000, NULL, NULL)`,
          [chainId, id, ghost, 'cd'.repeat(32)],
        );
        await db.query(`INSERT INTO meta_txn_bundles (chain_id, bundle_id, meta_txn_id, wallet, nonce_space, nonce) VALUES ($1, $2, $2, $3, 0, 0)`, [chainId, id, ghost]);
        await db.query(`INSERT INTO relay_txs (chain_id, sender, nonce, meta_txn_id, hash, raw, gas_limit) VALUES ($1, $2, 7, $3, $4, '0x', 100000)`, [chainId, ghost, id, `0x${'ee'.repeat(32)}`]);
        await db.query(`INSERT INTO relay_senders (chain_id, address, next_nonce) VALUES ($1, $2, 8)`, [chainId, ghost]);
        await db.query(`INSERT INTO relay_instances (chain_id, owner, seen_until) VALUES ($1, 'gone:1', now() + interval '1 hour')`, [chainId]);
      }
      const sponsors = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM gas_sponsors WHERE project_id = $1 AND deleted_at IS NULL`, [project])).rows[0]!.n;
      return { project, sponsors, dev: await rowsOf(db, devChain), other: await rowsOf(db, other) };
    });
    // On the dev chain: at least the rows above (besides whatever earlier runs left).
    for (const [table, n] of Object.entries({ meta_txns: 2, meta_txn_bundles: 1, relay_txs: 1, relay_senders: 1, relay_instances: 1 })) {
      expect(before.dev[table], table).toBeGreaterThanOrEqual(n);
    }
    expect(before.other).toEqual({ meta_txns: 2, meta_txn_bundles: 1, relay_txs: 1, relay_senders: 1, relay_instances: 1 });
    return { devChain, before };
  }

  it("`npm start` reuses the database and the dev key; /ready only once this start's manifest is written; one Ctrl-C to its process group drains and exits 0", async () => {
    const first = JSON.parse(readFileSync(manifestPath, 'utf8'));
    // The previous chain's queue, for the test after this one: this start is its next start.
    seeded = await seedPreviousQueue();
    const port = await freePort();
    // As a developer runs it: `npm start` in the checkout, in a terminal (a process group of its own,
    // which a Ctrl-C signals whole: npm, node and anvil each get SIGINT, and npm passes its copy on).
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_'))), ...folder.env, LOG_LEVEL: 'info' };
    const npm = spawn('npm', ['start', '--', '--port', String(port), '--data', folder.data, '--manifest', manifestPath], { env, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    npm.stdout.on('data', (d) => (out += d));
    npm.stderr.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((r) => npm.on('exit', (code) => r(code)));
    // Every process holding the pipe (npm, node, anvil) has exited.
    const allExited = new Promise((r) => npm.stdout.on('close', r));
    try {
      // What a script does: wait for /ready, then read the manifest. It must be this start's (its
      // baseUrl names this port; the previous start's named another), not the last run's.
      while ((await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status !== 200) {
        if (npm.exitCode !== null) throw new Error(`npm start exited:\n${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
      expect(first.baseUrl).not.toBe(`http://127.0.0.1:${port}`);
      expect(m.baseUrl).toBe(`http://127.0.0.1:${port}`);
      expect(m.accessKey).toBe(first.accessKey);
      if (TEST_DB === 'pglite') expect(existsSync(join(folder.data, 'db'))).toBe(true);
      const keyed = await post(`${m.baseUrl}/rpc/Metadata/RuntimeStatus`, {}, { 'X-Access-Key': m.accessKey });
      expect(keyed.status).toBe(200);
      // The terminal's Ctrl-C: SIGINT to the whole group.
      process.kill(-npm.pid!, 'SIGINT');
      const code = await exited;
      await allExited;
      expect(out, out).toMatch(/"msg":"shut down cleanly"/);
      expect(out).not.toContain('second signal');
      expect(out).not.toContain('exited unexpectedly');
      expect(code, out).toBe(0);
      // Nothing of it is left: anvil stopped with it (its RPC refuses).
      expect(await rpcAnswers(m.chain.rpcUrl)).toBe(false);
    } finally {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  it('forgets the relayer queue of the previous dev chain on the next start, and keeps the project, key and sponsorship rules', async () => {
    // The next start is the `npm start` test's, on the queue seedPreviousQueue left before it.
    if (!seeded) throw new Error("the previous chain's queue was not seeded: the `npm start` test above did not run");
    const { devChain, before } = seeded;
    await withDevDb(async (db) => {
      const now = await rowsOf(db, devChain);
      // Nothing of the previous chain's queue is left; the new run has registered only itself and its own senders.
      expect([now.meta_txns, now.meta_txn_bundles, now.relay_txs]).toEqual([0, 0, 0]);
      const senders = (await db.query<{ address: string }>(`SELECT address FROM relay_senders WHERE chain_id = $1`, [devChain])).rows.map((r) => r.address);
      expect(senders).not.toContain(ghost);
      const instances = (await db.query<{ owner: string }>(`SELECT owner FROM relay_instances WHERE chain_id = $1`, [devChain])).rows.map((r) => r.owner);
      expect(instances).not.toContain('gone:1');
      expect(await rowsOf(db, other)).toEqual(before.other);
      expect((await db.query(`SELECT 1 FROM projects WHERE id = $1 AND name = 'dev'`, [before.project])).rows).toHaveLength(1);
      const sponsors = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM gas_sponsors WHERE project_id = $1 AND deleted_at IS NULL`, [before.project])).rows[0]!.n;
      expect(sponsors).toBe(before.sponsors);
      expect((await db.query(`SELECT 1 FROM gas_sponsors WHERE address = $1 AND chain_id = $2`, [sponsorRule, devChain])).rows).toHaveLength(1);
    });
  });
  it('a stop sent to the process alone while it starts ends the start at once and leaves no anvil running', async () => {
    // A service manager's stop or `kill <pid>` reaches dev only (a terminal's Ctrl-C reaches anvil too):
    // before, node's default for the signal ended dev without its exit hook and anvil ran on, orphaned.
    const f = await devFolder();
    const dev = f.start();
    try {
      const [, pid] = await dev.waitFor(/anvil (\d+) listening/, 120_000);
      const code = await dev.stop('SIGTERM');
      // It was still starting: no banner, the start ended by the signal (exit 143, as a shell reports SIGTERM).
      expect(dev.output()).not.toMatch(/metarelay dev is ready/);
      expect(code).toBe(143);
      const alive = () => {
        try {
          process.kill(Number(pid), 0);
          return true;
        } catch {
          return false;
        }
      };
      await expect.poll(alive, { message: `anvil ${pid} gone with its parent` }).toBe(false);
    } finally {
      await dev.stop('SIGKILL');
      await f.remove();
    }
  });
});
