import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generatePrivateKey } from 'viem/accounts';
import { deploySequenceV2Context, startAnvil, type AnvilHandle } from '../src/devchain/index.ts';
import { openDb } from '../src/store/db.ts';
import { runCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB, TEST_PG_URL, pgUrlFor } from './support/env.ts';
import { QUOTE_SECRET, SENDER_KEYS } from './support/relayer-env.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';
import { freePort } from './support/ports.ts';

const dir = mkdtempSync(join(tmpdir(), 'metarelay-doctor-'));
let chain: TokenChain;
let bare: AnvilHandle;
let testDb: TestDb;
let gateway: Server;
let gatewayUrl: string;
let gatewayHits = 0;
/** An empty database: reachable, never migrated. */
let emptyDb: string;
const emptyPgName = `metarelay_doctor_empty_${process.pid}`;

beforeAll(async () => {
  chain = await startTokenChain();
  await deploySequenceV2Context(chain.anvil.rpcUrl);
  bare = await startAnvil({ blockTime: null });
  testDb = await createTestDb();
  if (TEST_DB === 'pglite') await testDb.db.close();
  // A stand-in IPFS gateway: answers the empty identity CID the way a real one does.
  gateway = createHttpServer((req, res) => {
    gatewayHits++;
    res.writeHead(req.url === '/ipfs/bafkqaaa' ? 200 : 404).end();
  });
  await new Promise<void>((r) => gateway.listen(0, '127.0.0.1', r));
  gatewayUrl = `http://127.0.0.1:${(gateway.address() as AddressInfo).port}/ipfs/`;
  if (TEST_DB === 'postgres') {
    const admin = await openDb(TEST_PG_URL);
    await admin.query(`CREATE DATABASE ${emptyPgName}`);
    await admin.close();
    emptyDb = pgUrlFor(emptyPgName);
  } else {
    emptyDb = join(dir, 'empty-pglite');
    await (await openDb(emptyDb)).close();
  }
}, 120_000);

afterAll(async () => {
  gateway?.close();
  await bare?.stop();
  await chain?.stop();
  await testDb?.drop();
  if (TEST_DB === 'postgres') {
    const admin = await openDb(TEST_PG_URL);
    await admin.query(`DROP DATABASE IF EXISTS ${emptyPgName} WITH (FORCE)`);
    await admin.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

const write = (name: string, cfg: unknown) => {
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(cfg));
  return file;
};
const lines = (out: string) => out.trim().split('\n');

describe(`metarelay doctor (${TEST_DB})`, () => {
  it('passes a healthy deployment, one line per check', async () => {
    const cfg = write('healthy.json', {
      database: testDb.location,
      ipfsGateways: [gatewayUrl],
      relayer: { quoteSecret: QUOTE_SECRET },
      chains: [{ ...chain.chainConfig, relayer: { senderKeys: SENDER_KEYS, minSenderBalance: '1' } }],
    });
    const r = await runCli(['doctor', '--config', cfg]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const out = lines(r.stdout);
    expect(out.at(-1)).toBe('all checks passed');
    const name = chain.chainConfig.name;
    for (const re of [
      /^ok {4}database: .* answers$/,
      /^ok {4}migrations: all \d+ applied$/,
      /^ok {4}quote secret: set$/,
      new RegExp(`^ok {4}chain ${name}: .* answers chainId ${chain.chainConfig.chainId} \\(block \\d+\\)$`),
      new RegExp(`^ok {4}multicall3 ${name}: deployed`),
      new RegExp(`^ok {4}sequence context ${name}: all 5 contracts deployed$`),
      /^ok {4}ipfs gateway: http:\/\/127\.0\.0\.1:\d+\/ipfs\/ answers \(HTTP 200\)$/,
    ]) {
      expect(
        out.filter((l) => re.test(l)),
        `${re}\n${r.stdout}`,
      ).toHaveLength(1);
    }
    expect(out.filter((l) => l.startsWith(`ok    sender ${name}: 0x`))).toHaveLength(SENDER_KEYS.length);
  });

  it('fails a broken deployment and says what is wrong, line by line', async () => {
    const deadPort = await freePort();
    const gatewayPort = await freePort();
    const cfg = write('broken.json', {
      database: emptyDb,
      ipfsGateways: [`http://127.0.0.1:${gatewayPort}/ipfs/`],
      chains: [
        // A node that is not there: the line names why (not only viem's "HTTP request failed.").
        { chainId: 10, name: 'dead', rpcUrls: [`http://127.0.0.1:${deadPort}`] },
        // The right node under the wrong chain id.
        { chainId: 5, name: 'wrongid', rpcUrls: [chain.anvil.rpcUrl] },
        // A chain without Multicall3 or the Sequence contracts, relaying with an empty sender.
        { chainId: bare.chainId, name: 'bare', rpcUrls: [bare.rpcUrl], relayer: { senderKeys: [generatePrivateKey()] } },
      ],
    });
    const r = await runCli(['doctor', '--config', cfg]);
    expect(r.code, r.stdout + r.stderr).toBe(1);
    const out = lines(r.stdout);
    for (const re of [
      new RegExp(`^FAIL  chain wrongid: .* answers chainId ${chain.chainConfig.chainId}, configured 5$`),
      // serve applies pending migrations itself: a warning, not a failure.
      /^warn  migrations: \d+ pending .*serve applies them at start, or run `metarelay migrate` first$/,
      /^warn  multicall3 bare: absent/,
      /^FAIL  sequence context bare: no code at factory 0x/,
      /^FAIL  sender bare: 0x[0-9a-fA-F]{40} holds 0 \(floor 0\): fund it$/,
      new RegExp(`^FAIL  chain dead: http://127\\.0\\.0\\.1:${deadPort}/ unreachable: HTTP request failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${deadPort}$`),
      // Metadata falls back to the next gateway: a warning.
      new RegExp(`^warn  ipfs gateway: .* unreachable: fetch failed: connect ECONNREFUSED 127\\.0\\.0\\.1:${gatewayPort}$`),
      // A shared database needs the quote secret; PGlite is one process's, so only a warning there.
      TEST_DB === 'postgres' ? /^FAIL  quote secret: unset on a database several processes can share/ : /^warn  quote secret: unset/,
    ]) {
      expect(
        out.filter((l) => re.test(l)),
        `${re}\n${r.stdout}`,
      ).toHaveLength(1);
    }
    expect(out.at(-1)).toMatch(/^\d+ check\(s\) failed$/);
  });

  it('--offline skips the IPFS gateways (none is asked) and passes an otherwise healthy deployment', async () => {
    const cfg = write('offline.json', {
      database: testDb.location,
      ipfsGateways: [gatewayUrl, `http://127.0.0.1:${await freePort()}/ipfs/`],
      relayer: { quoteSecret: QUOTE_SECRET },
      chains: [{ ...chain.chainConfig, relayer: { senderKeys: SENDER_KEYS, minSenderBalance: '1' } }],
    });
    const hits = gatewayHits;
    const r = await runCli(['doctor', '--offline', '--config', cfg]);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const out = lines(r.stdout);
    expect(out.filter((l) => l.includes('ipfs gateway'))).toEqual(['skip  ipfs gateways: not checked (--offline)']);
    expect(gatewayHits).toBe(hits);
    expect(out.at(-1)).toBe('all checks passed');
  });
});
