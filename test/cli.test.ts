import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../src/store/db.ts';
import { runCli, runMain } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';

describe(`metarelay CLI (${TEST_DB})`, () => {
  let testDb: TestDb;
  let dbArgs: string[];
  beforeAll(async () => {
    testDb = await createTestDb();
    // PGlite is single-process: release our handle so the CLI process can open the folder.
    if (TEST_DB === 'pglite') await testDb.db.close();
    dbArgs = ['--database', testDb.location];
  });
  afterAll(async () => {
    await testDb?.drop().catch(() => undefined);
  });

  // The commands' own work runs in this process (runMain: main() as the binary runs it, its output and
  // exit code), ~0.3 s of CPU less per command on PGlite than a process each; what the shell sees of
  // a process of the built binary (JSON on stdout, a note on stderr, codes 0 and 2) is checked with
  // runCli below: a project and a key created, a refusal, a bad config, an unknown command, migrate.
  it('manages sponsorship rules of a project: add, list, disable, remove, with clear errors', async () => {
    expect((await runMain(['projects', 'create', 'sponsoring', ...dbArgs])).code).toBe(0);
    const token = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
    const add = await runMain(['sponsors', 'add', '--project', 'sponsoring', '--chain', 'polygon', '--kind', 'token', '--address', token, '--name', 'USDC', ...dbArgs]);
    expect(add.code, add.stderr).toBe(0);
    const rule = JSON.parse(add.stdout);
    expect(rule).toMatchObject({ chainId: 137, kind: 'TOKEN', address: token.toLowerCase(), active: true });
    const dup = await runMain(['sponsors', 'add', '--project', 'sponsoring', '--chain', '137', '--kind', 'TOKEN', '--address', token, ...dbArgs]);
    expect(dup.code).toBe(2);
    expect(dup.stderr).toContain('already has a TOKEN sponsorship');
    const badKind = await runMain(['sponsors', 'add', '--project', 'sponsoring', '--chain', '137', '--kind', 'everything', '--address', token, ...dbArgs]);
    expect(badKind.code).toBe(2);
    expect(badKind.stderr).toContain('--kind must be one of');
    expect((await runMain(['sponsors', 'disable', String(rule.id), '--project', 'sponsoring', ...dbArgs])).stdout).toContain('"active":false');
    // Policy flags: validated as the admin API validates them; "" clears.
    const denied = '0x' + 'ab'.repeat(20);
    const set = await runMain(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--total-budget-wei', '5000', '--valid-until', '2030-01-01T00:00:00Z', '--deny', denied, ...dbArgs]);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ totalBudgetWei: '5000', validUntil: '2030-01-01T00:00:00.000Z', denyWallets: [denied], spentTotalWei: '0' });
    const cleared = await runMain(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--total-budget-wei', '', ...dbArgs]);
    expect(JSON.parse(cleared.stdout)).toMatchObject({ totalBudgetWei: null, denyWallets: [denied] });
    const badCap = await runMain(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--txn-cap-wei', '1.5', ...dbArgs]);
    expect(badCap.code).toBe(2);
    expect(badCap.stderr).toContain('txnCapWei: must be a decimal amount of wei');
    // polygon has no relayer with a native/USD feed here: a USD cap is refused, not stored.
    const usd = await runMain(['sponsors', 'set', String(rule.id), '--project', 'sponsoring', '--daily-cap-usd', '5', ...dbArgs]);
    expect(usd.code).toBe(2);
    expect(usd.stderr).toContain('need a native/USD price');
    const list = await runMain(['sponsors', 'list', '--project', 'sponsoring', ...dbArgs]);
    expect(
      list.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual([rule.id]);
    expect((await runMain(['sponsors', 'remove', String(rule.id), '--project', 'sponsoring', ...dbArgs])).stdout).toContain('removed');
    expect((await runMain(['sponsors', 'list', '--project', 'sponsoring', ...dbArgs])).stdout.trim()).toBe('');
  }, 360_000);

  it('takes sponsorship caps in native units and prints each cap readable beside its wei', async () => {
    expect((await runMain(['projects', 'create', 'readable-caps', ...dbArgs])).code).toBe(0);
    const add = await runMain([
      'sponsors',
      'add',
      '--project',
      'readable-caps',
      '--chain',
      'polygon',
      '--address',
      '0x' + '12'.repeat(20),
      '--daily-cap',
      '0.05',
      '--total-budget-wei',
      '1234500000000000000',
      ...dbArgs,
    ]);
    expect(add.code, add.stderr).toBe(0);
    const rule = JSON.parse(add.stdout);
    expect(rule).toMatchObject({ dailyCapWei: '50000000000000000', totalBudgetWei: '1234500000000000000' });
    expect(rule.readable).toEqual({ dailyCap: '0.05 ETH', totalBudget: '1.2345 ETH', spentToday: '0 ETH', spentTotal: '0 ETH' });
    // What the database holds is the wei the native figure stands for.
    const db = await openDb(testDb.location);
    try {
      const [row] = (await db.query<{ daily: string; total: string }>('SELECT daily_cap_wei::text AS daily, total_budget_wei::text AS total FROM gas_sponsors WHERE id = $1', [rule.id])).rows;
      expect(row).toEqual({ daily: '50000000000000000', total: '1234500000000000000' });
    } finally {
      await db.close();
    }
    const both = await runMain(['sponsors', 'set', String(rule.id), '--project', 'readable-caps', '--txn-cap', '0.1', '--txn-cap-wei', '5', ...dbArgs]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--txn-cap and --txn-cap-wei are the same cap');
    const bad = await runMain(['sponsors', 'set', String(rule.id), '--project', 'readable-caps', '--txn-cap', '1e-3', ...dbArgs]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--txn-cap: "1e-3" is not an amount in native units');
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

    const list = await runMain(['keys', 'list', '--project', 'acme', ...dbArgs]);
    expect(list.stdout).toContain('"label":"ci"');
    expect(list.stdout).not.toContain(accessKey);

    const r = await runMain(['keys', 'revoke', accessKey, ...dbArgs]);
    expect(r.code, r.stderr).toBe(0);
    const again = await runMain(['keys', 'revoke', accessKey, ...dbArgs]);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain('no live key');

    // Both kinds: publishable (held to origins) and secret; a secret key rotated keeps its kind.
    const web = JSON.parse((await runMain(['keys', 'create', '--project', 'acme', '--origin', 'https://app.example', ...dbArgs])).stdout);
    expect(web).toMatchObject({ kind: 'publishable', allowedOrigins: ['https://app.example'] });
    const sec = await runMain(['keys', 'create', '--project', 'acme', '--secret', '--label', 'backend', ...dbArgs]);
    expect(sec.code, sec.stderr).toBe(0);
    const secret = JSON.parse(sec.stdout);
    expect(secret).toMatchObject({ kind: 'secret', label: 'backend', allowedOrigins: null });
    expect(secret.accessKey).toMatch(/^mr_sk_/);
    const rotated = await runMain(['keys', 'rotate', String(secret.id), '--project', 'acme', ...dbArgs]);
    expect(rotated.code, rotated.stderr).toBe(0);
    expect(JSON.parse(rotated.stdout)).toMatchObject({ kind: 'secret', label: 'backend' });
    const listed = (await runMain(['keys', 'list', '--project', 'acme', ...dbArgs])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(listed.find((k) => k.id === secret.id)).toMatchObject({ kind: 'secret' });
    expect(listed.find((k) => k.id === secret.id).revokedAt).not.toBeNull();
    expect((await runMain(['keys', 'rotate', String(secret.id), '--project', 'acme', ...dbArgs])).stderr).toContain('no live key');
    expect((await runMain(['keys', 'create', '--project', 'acme', '--origin', 'app.example/path', ...dbArgs])).stderr).toContain('is not an origin');
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
