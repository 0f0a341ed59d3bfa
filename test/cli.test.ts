import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb, type Db } from '../src/store/db.ts';
import { runCli, runNode, startCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';

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

describe(`metarelay CLI (${TEST_DB})`, () => {
  let testDb: TestDb;
  let dbArgs: string[];
  let _dbEnv: Record<string, string>;
  beforeAll(async () => {
    testDb = await createTestDb();
    // PGlite is single-process: release our handle so the CLI process can open the folder.
    if (TEST_DB === 'pglite') await testDb.db.close();
    dbArgs = ['--database', testDb.location];
    _dbEnv = TEST_DB === 'postgres' ? { DATABASE_URL: testDb.location } : {};
  });
  afterAll(async () => {
    await testDb?.drop().catch(() => undefined);
  });

  it('manages sponsorship rules of a project: add, list, disable, remove, with clear errors', async () => {
    expect((await runCli(['projects', 'create', 'sponsoring', ...dbArgs])).code).toBe(0);
    const token = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    const add = await runCli(['sponsors', 'add', '--project', 'sponsoring', '--chain', 'polygon', '--kind', 'token', '--address', token, '--name', 'USDC', ...dbArgs]);
    expect(add.code, add.stderr).toBe(0);
    const rule = JSON.parse(add.stdout);
    expect(rule).toMatchObject({ chainId: 137, kind: 'TOKEN', address: token.toLowerCase(), active: true });
    const dup = await runCli(['sponsors', 'add', '--project', 'sponsoring', '--chain', '137', '--kind', 'TOKEN', '--address', token, ...dbArgs]);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toContain('already has a TOKEN sponsorship');
    const badKind = await runCli(['sponsors', 'add', '--project', 'sponsoring', '--chain', '137', '--kind', 'everything', '--address', token, ...dbArgs]);
    expect(badKind.code).toBe(2);
    expect(badKind.stderr).toContain('--kind must be one of');
    expect((await runCli(['sponsors', 'disable', String(rule.id), '--project', 'sponsoring', ...dbArgs])).stdout).toContain('"active":false');
    // Policy flags: validated as the admin API validates them; "" clears.
    const denied = '0x' + 'ab'.repeat(20);
    const set = await runCli(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--total-budget-wei', '5000', '--valid-until', '2030-01-01T00:00:00Z', '--deny', denied, ...dbArgs]);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ totalBudgetWei: '5000', validUntil: '2030-01-01T00:00:00.000Z', denyWallets: [denied], spentTotalWei: '0' });
    const cleared = await runCli(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--total-budget-wei', '', ...dbArgs]);
    expect(JSON.parse(cleared.stdout)).toMatchObject({ totalBudgetWei: null, denyWallets: [denied] });
    const badCap = await runCli(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--txn-cap-wei', '1.5', ...dbArgs]);
    expect(badCap.code).toBe(2);
    expect(badCap.stderr).toContain('txnCapWei: must be a decimal amount of wei');
    // polygon has no relayer with a native/USD feed here: a USD cap is refused, not stored.
    const usd = await runCli(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--daily-cap-usd', '5', ...dbArgs]);
    expect(usd.code).toBe(2);
    expect(usd.stderr).toContain('need a native/USD price');
    const list = await runCli(['sponsors', 'list', '--project', 'sponsoring', ...dbArgs]);
    expect(
      list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual([rule.id]);
    expect((await runCli(['sponsors', 'remove', String(rule.id), '--project', 'sponsoring', ...dbArgs])).stdout).toContain('removed');
    expect((await runCli(['sponsors', 'list', '--project', 'sponsoring', ...dbArgs])).stdout.trim()).toBe('');
  });

  it('creates a project and a key, lists it, revokes it', async () => {
    const p = await runCli(['projects', 'create', 'acme', ...dbArgs]);
    expect(p.code, p.stderr).toBe(0);
    expect(JSON.parse(p.stdout)).toMatchObject({ name: 'acme' });

    const dup = await runCli(['projects', 'create', 'acme', ...dbArgs]);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toContain('already exists');

    const k = await runCli(['keys', 'create', '--project', 'acme', '--label', 'ci', ...dbArgs]);
    expect(k.code, k.stderr).toBe(0);
    const { accessKey } = JSON.parse(k.stdout);
    expect(accessKey).toMatch(/^mr_/);
    expect(k.stderr).toContain('cannot be shown again');

    const list = await runCli(['keys', 'list', '--project', 'acme', ...dbArgs]);
    expect(list.stdout).toContain('"label":"ci"');
    expect(list.stdout).not.toContain(accessKey);

    const r = await runCli(['keys', 'revoke', accessKey, ...dbArgs]);
    expect(r.code, r.stderr).toBe(0);
    const again = await runCli(['keys', 'revoke', accessKey, ...dbArgs]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('no live key');
  });

  it('refuses a wrong config file naming the key, and exits non-zero', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'metarelay-cli-'));
    const cfg = join(dir, 'bad.json');
    writeFileSync(cfg, JSON.stringify({ port: 'http', chains: [{ chainId: 137, name: 'polygon', rpcUrls: ['not a url'] }] }));
    const res = await runCli(['serve', '--config', cfg]);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('port:');
    expect(res.stderr).toContain('chains[0].rpcUrls[0]');
  });

  it('rejects unknown commands and flags with usage', async () => {
    const res = await runCli(['frobnicate']);
    expect(res.code).toBe(2);
    expect(res.stderr).toContain('Usage:');
    const flag = await runCli(['migrate', '--nope']);
    expect(flag.code).toBe(2);
  });

  it('migrate applies nothing on an up-to-date database', async () => {
    const res = await runCli(['migrate', ...dbArgs]);
    expect(res.code, res.stderr).toBe(0);
    expect(res.stdout).toContain('up to date');
  });
});

describe(`metarelay dev (${TEST_DB})`, () => {
  const dir = mkdtempSync(join(tmpdir(), 'metarelay-dev-'));
  const manifestPath = join(dir, 'manifest.json');
  let testDb: TestDb | undefined;
  let env: Record<string, string> = {};
  beforeAll(async () => {
    if (TEST_DB === 'postgres') {
      testDb = await createTestDb();
      env = { DATABASE_URL: testDb.location };
    }
  });
  afterAll(async () => {
    await testDb?.drop();
  });

  it('starts chain and service, writes the manifest, answers the quick-start calls, and stops everything on SIGTERM', async () => {
    const dev = startCli(['dev', '--port', '0', '--data', join(dir, 'data'), '--manifest', manifestPath], env);
    try {
      // A newcomer's first start: solc compiles every contract cold (its cache is in the fresh data
      // folder). That took 65 s on a machine at load 19, so the wait is generous: it bounds a hang.
      await dev.waitFor(/metarelay dev is ready/, 240_000);
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

      // The relayer quick-start: the README's example relays a gasless transaction from a new wallet.
      expect(m.relayerUrl).toBe(`${m.baseUrl}/relayer/anvil`);
      const example = await runNode(['examples/relay-gasless.mjs'], { METARELAY_MANIFEST: manifestPath });
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
      const relayerStatus = await post(`${m.relayerUrl}/rpc/Relayer/RuntimeStatus`, {});
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
  }, 330_000);

  it('reuses the database and the dev key on the next start', async () => {
    const first = JSON.parse(readFileSync(manifestPath, 'utf8'));
    const dev = startCli(['dev', '--port', '0', '--data', join(dir, 'data'), '--manifest', manifestPath], env);
    try {
      await dev.waitFor(/metarelay dev is ready/);
      const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
      expect(m.accessKey).toBe(first.accessKey);
      if (TEST_DB === 'pglite') expect(existsSync(join(dir, 'data', 'db'))).toBe(true);
      const keyed = await post(`${m.baseUrl}/rpc/Metadata/RuntimeStatus`, {}, { 'X-Access-Key': m.accessKey });
      expect(keyed.status).toBe(200);
      expect(await dev.stop('SIGINT')).toBe(0);
    } finally {
      await dev.stop('SIGKILL');
    }
  });

  /** The dev database while dev is stopped (PGlite: the folder is free only then). */
  async function withDevDb<T>(fn: (db: Db) => Promise<T>): Promise<T> {
    if (testDb) return fn(testDb.db);
    const db = await openDb(join(dir, 'data', 'db'));
    try {
      return await fn(db);
    } finally {
      await db.close();
    }
  }

  it('forgets the relayer queue of the previous dev chain on the next start, and keeps the project, key and sponsorship rules', async () => {
    const first = JSON.parse(readFileSync(manifestPath, 'utf8'));
    const devChain = first.chain.chainId as number;
    const other = 137; // another chain in the same database: not the dev chain, so left alone
    const id = 'ab'.repeat(32);
    const ghost = `0x${'de'.repeat(20)}`;
    const rowsOf = (db: Db, chainId: number) =>
      Promise.all(
        ['meta_txns', 'meta_txn_bundles', 'relay_txs', 'relay_senders', 'relay_instances'].map(async (table) => {
          const r = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table} WHERE chain_id = $1`, [chainId]);
          return [table, r.rows[0]!.n] as const;
        }),
      ).then(Object.fromEntries);
    const sponsorRule = `0x${'5e'.repeat(20)}`;
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

    const dev = startCli(['dev', '--port', '0', '--data', join(dir, 'data'), '--manifest', manifestPath], env);
    try {
      await dev.waitFor(/metarelay dev is ready/);
      const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
      expect(m.accessKey).toBe(first.accessKey);
      const keyed = await post(`${m.baseUrl}/rpc/Metadata/RuntimeStatus`, {}, { 'X-Access-Key': m.accessKey });
      expect(keyed.status).toBe(200);
      expect(await dev.stop('SIGINT')).toBe(0);
    } finally {
      await dev.stop('SIGKILL');
    }

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
});
