// Contract directory end to end: a generated token list of ~2 900 entries imported through the CLI,
// then ranked search (exact symbol, exact name, prefix, full text, typos), filters, pagination,
// address search, the documented precedence of list / chain / override layers, overrides through
// the CLI and the Admin RPC, and the admin authorisation rules. Real anvil, real database.

import { mulberry32 } from './support/random.ts';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { buildApp } from '../src/cli/app.ts';
import type { ContractInfoWire } from '../src/metadata/contracts/contract-view.ts';
import { importTokenList } from '../src/metadata/contracts/token-list.ts';
import { createServices, type Services } from '../src/services.ts';
import { openDb } from '../src/store/db.ts';
import { createLogger } from '../src/telemetry/logger.ts';
import { runCli, type CliResult } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { TEST_DB } from './support/env.ts';
import { rpc } from './support/service.ts';
import { b64, startTokenChain, type TokenChain } from './support/token-chain.ts';

const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';
const IPFS_GATEWAY = 'https://ipfs.test/ipfs/';
const LIST_NAME = 'Metarelay Test List';

// ---------------------------------------------------------------- the generated token list

const rand = mulberry32(20240611);
const pick = <T>(xs: readonly T[]) => xs[Math.floor(rand() * xs.length)]!;
const randomAddress = (): Address => `0x${Array.from({ length: 40 }, () => Math.floor(rand() * 16).toString(16)).join('')}` as Address;

const SYLLABLES = [
  'ka',
  'lo',
  'mi',
  'ra',
  'ven',
  'tor',
  'zen',
  'qua',
  'pix',
  'dor',
  'bel',
  'fi',
  'gar',
  'hol',
  'jun',
  'ke',
  'lux',
  'mor',
  'nex',
  'ox',
  'pol',
  'quin',
  'rho',
  'sol',
  'tal',
  'vy',
  'wex',
  'xen',
  'yor',
  'zal',
  'bri',
  'cor',
  'dex',
  'fen',
  'glo',
];
// Words that would collide with the queries under test are not generated.
const RESERVED = /aave|uni|usd|swa|wra|eth|coin|dai|sta|bri|teth|lant|adm|pin|list|chain|gall/i;
const WORDS: { word: string; sym: string }[] = [];
{
  const syms = new Set(['UNI', 'USDC', 'WETH', 'USDT', 'DAI', 'AAVE']);
  while (WORDS.length < 80) {
    const n = rand() < 0.5 ? 2 : 3;
    const raw = Array.from({ length: n }, () => pick(SYLLABLES)).join('');
    const word = raw[0]!.toUpperCase() + raw.slice(1);
    const sym = raw.slice(0, 4).toUpperCase();
    if (RESERVED.test(word) || syms.has(sym) || WORDS.some((w) => w.word === word)) continue;
    syms.add(sym);
    WORDS.push({ word, sym });
  }
}
const PATTERNS: Array<(w: string, s: string) => [string, string]> = [
  (w, s) => [w, s],
  (w, s) => [`Staked ${w}`, `st${s}`],
  (w, s) => [`Wrapped ${w}`, `w${s}`],
  (w, s) => [`${w} Governance`, `g${s}`],
  (w, s) => [`${w} Token`, `${s}T`],
  (w, s) => [`Bridged ${w}`, `${s}.b`],
  (w, s) => [`${w} LP`, `${s}-LP`],
  (w, s) => [`${w} Dollar`, `${s}D`],
  (w, s) => [`${w} Yield Vault`, `yv${s}`],
  (w, s) => [`${w} Index`, `${s}X`],
  (w, s) => [`${w} Classic`, `${s}C`],
  (w, s) => [`${w} Finance`, `${s}FI`],
  (w, s) => [`${w} DAO`, `${s}DAO`],
  (w, s) => [`${w} Protocol`, `${s}P`],
  (w, s) => [`${w} Network`, `${s}N`],
  (w, s) => [`Super ${w}`, `SUP${s}`],
];

interface ListToken {
  chainId: number;
  address: string;
  name: string;
  symbol: string;
  decimals: number;
  logoURI?: string;
  extensions?: Record<string, unknown>;
}
const tok = (chainId: number, address: string, name: string, symbol: string, decimals = 18, extra: Partial<ListToken> = {}): ListToken => ({
  chainId,
  address,
  name,
  symbol,
  decimals,
  logoURI: `https://logos.example/${chainId}/${address.toLowerCase()}.png`,
  ...extra,
});

// Real addresses, realistic names.
const MAINNET_USDC = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48';
const REAL: ListToken[] = [
  tok(1, MAINNET_USDC, 'USD Coin', 'USDC', 6),
  // As in the Uniswap default list: an ipfs:// logo.
  tok(1, '0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984', 'Uniswap', 'UNI', 18, { logoURI: 'ipfs://QmXttGpZrECX5qCyXbBQiqgQNytVGeZW5Anewvh2jc4psg' }),
  tok(1, '0xC02aaA39b223FE8D0A0e5C4F27eAD9083C756Cc2', 'Wrapped Ether', 'WETH'),
  tok(1, '0xdAC17F958D2ee523a2206206994597C13D831ec7', 'Tether USD', 'USDT', 6),
  tok(1, '0x6B175474E89094C44Da98b954EedeAC495271d0F', 'Dai Stablecoin', 'DAI'),
  tok(1, '0x7Fc66500c84A76Ad7e9c93437bFc5Ac33E2DDaE9', 'Aave Token', 'AAVE'),
  tok(1, '0xBcca60bB61934080951369a648Fb03DF4F96263C', 'Aave Interest Bearing USDC', 'aUSDC', 6),
  tok(1, '0x4da27a545c0c5B758a6BA100e3a049001de870f5', 'Staked Aave', 'stkAAVE'),
  tok(137, '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359', 'USD Coin', 'USDC', 6),
  tok(137, '0x2791Bca1f2de4661ED88A30C99A7a9449Aa84174', 'USD Coin (Bridged)', 'USDC.e', 6),
  tok(137, '0xb33EaAd8d922B1083446DC23f610c2567fB5180f', 'Uniswap (PoS)', 'UNI'),
  tok(137, '0x7ceB23fD6bC0adD59E62ac25578270cFf1b9f619', 'Wrapped Ether', 'WETH'),
  tok(137, '0x385Eeac5cB85A38A9a07A70c73e0a3271CfB54A7', 'Aavegotchi', 'GHST'),
  // A curated USDC on the local chain whose address sorts after any deployed contract's.
  tok(31337, '0xffffffffffffffffffffffffffffffffffff0001', 'USD Coin', 'USDC', 6, { logoURI: 'ipfs://QmLocalUsdcLogo/usdc.svg' }),
];
const GENERATED: ListToken[] = [];
for (const chainId of [1, 137]) {
  for (const { word, sym } of WORDS) for (const p of PATTERNS) GENERATED.push(tok(chainId, randomAddress(), ...p(word, sym)));
}
for (const { word, sym } of WORDS) for (const p of PATTERNS.slice(0, 4)) GENERATED.push(tok(31337, randomAddress(), ...p(word, sym)));
const BROKEN_DECIMALS = randomAddress();
const BAD: unknown[] = [
  { chainId: 1, address: '0x1234', name: 'Short Address Token', symbol: 'SAT', decimals: 18 },
  { chainId: 1, address: BROKEN_DECIMALS, name: 'Broken Decimals Token', symbol: 'BDT', decimals: 300 },
  { chainId: 1, address: randomAddress(), name: 'No Symbol Token', decimals: 18 },
];

// ---------------------------------------------------------------- fixtures

interface Served {
  app: FastifyInstance;
  services: Services;
  accessKey: string;
  close(): Promise<void>;
}

let chain: TokenChain;
let testDb: TestDb;
let api: Served;
let dir: string;
let listFile: string;
let importRun: CliResult;
let badRuns: { notList: CliResult; notJson: CliResult };
let overrideRun: CliResult;
let listTokens: unknown[];
const c = {} as Record<'chainDollar' | 'chainGallery' | 'pinned' | 'adminTarget' | 'fakeUsdc' | 'fakeUni' | 'positions', Address>;

const cliEnv = (): Record<string, string> => (TEST_DB === 'postgres' ? { DATABASE_URL: testDb.location } : {});
const db = () => ['--database', testDb.location];

async function serve(): Promise<Served> {
  const location = testDb.location;
  const handle = await openDb(location);
  const cfg = parseConfig({
    allowPrivateNetworks: true,
    logLevel: 'silent',
    chains: [chain.chainConfig],
    admin: { tokens: [ADMIN_TOKEN] },
    ipfsGateways: [IPFS_GATEWAY],
    metadata: { inlineWaitMs: 30_000, fetchTimeoutMs: 5_000 },
    database: location,
  });
  const services = await createServices(cfg, { db: handle, log: createLogger('silent'), pollingIntervalMs: 50, migrate: false });
  const app = await buildApp(services);
  const project = await services.projects.create(`search-${Math.random().toString(36).slice(2, 8)}`);
  const { key } = await services.accessKeys.create(project.id, 'test');
  return {
    app,
    services,
    accessKey: key,
    async close() {
      await app.close();
      await services.close();
      await handle.close();
    },
  };
}

/** Runs the CLI on the service's database: PGlite is single-process, so the service steps aside. */
async function cliWhileServing(args: string[]): Promise<CliResult> {
  if (TEST_DB === 'postgres') return runCli([...args, ...db()], cliEnv());
  await api.close();
  try {
    return await runCli([...args, ...db()], cliEnv());
  } finally {
    api = await serve();
  }
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'metarelay-search-'));
  const gallery = `data:application/json;base64,${b64(JSON.stringify({ description: 'from the document', image: 'https://doc.example/g.png', external_link: 'https://gallery.example' }))}`;
  [chain, testDb] = await Promise.all([startTokenChain(), createTestDb()]);
  [c.chainDollar, c.chainGallery, c.pinned, c.adminTarget, c.fakeUsdc, c.fakeUni, c.positions] = await chain.deploy([
    { contract: 'DevERC20', args: ['Chain Dollar', 'CHD'] },
    { contract: 'DevERC721', args: ['Chain Gallery', 'CGAL', 'http://127.0.0.1:9/g/', gallery] },
    { contract: 'DevERC20', args: ['Pinned Chain Name', 'PCN'] },
    { contract: 'DevERC20', args: ['Admin Chain Name', 'ACN'] },
    // Not in any list: what a scammer deploys, copying the real names.
    { contract: 'DevERC20', args: ['USD Coin', 'USDC'] },
    { contract: 'DevERC20', args: ['Uniswap', 'UNI'] },
    { contract: 'DevERC721', args: ['Uniswap V3 Positions NFT-V1', 'UNI-V3-POS', 'http://127.0.0.1:9/p/', ''] },
  ]);
  const LOCAL: ListToken[] = [
    tok(31337, c.chainDollar, 'Listed Dollar', 'LSD', 18, { logoURI: 'https://logos.example/lsd.png' }),
    tok(31337, c.chainGallery, 'Listed Gallery', 'LGAL', 0, { logoURI: 'https://logos.example/lgal.png', extensions: { description: 'from the list' } }),
    tok(31337, c.pinned, 'Pinned Listed', 'PLS', 18),
    tok(31337, c.adminTarget, 'Admin Listed', 'ALS', 18),
  ];
  listTokens = [...REAL, ...LOCAL, ...GENERATED.slice(0, 1000), ...BAD, ...GENERATED.slice(1000)];
  listFile = join(dir, 'list.json');
  writeFileSync(listFile, JSON.stringify({ name: LIST_NAME, timestamp: new Date().toISOString(), version: { major: 1, minor: 0, patch: 0 }, tokens: listTokens }));
  const notList = join(dir, 'not-a-list.json');
  writeFileSync(notList, JSON.stringify({ name: 'my wallet', items: [{ address: MAINNET_USDC }] }));
  const notJson = join(dir, 'not-json.json');
  writeFileSync(notJson, 'name,symbol\nUSD Coin,USDC\n');

  // PGlite is single-process: release our handle so the CLI can open the folder.
  if (TEST_DB === 'pglite') await testDb.db.close();
  const [imported, nl, nj] = await Promise.all([
    runCli(['tokenlist', 'import', listFile, ...db()], cliEnv()),
    runCli(['tokenlist', 'import', notList, '--database', 'memory://'], {}),
    runCli(['tokenlist', 'import', notJson, '--database', 'memory://'], {}),
  ]);
  importRun = imported;
  badRuns = { notList: nl, notJson: nj };
  if (importRun.code !== 0) throw new Error(`import failed: ${importRun.stderr}`);
  overrideRun = await runCli(
    [
      'contracts',
      'override',
      '--chain',
      'anvil',
      '--address',
      c.pinned,
      '--name',
      'Pinned Dollar',
      '--symbol',
      'PIN',
      '--decimals',
      '2',
      '--logo',
      'https://logos.example/pin.png',
      '--description',
      'Pinned by the operator',
      '--verified',
      ...db(),
    ],
    cliEnv(),
  );
  api = await serve();
  // The scam copies are read from the chain, so the directory holds them, uncurated.
  const res = await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: [c.fakeUsdc, c.fakeUni, c.positions] });
  if (res.status !== 200) throw new Error(JSON.stringify(res.body));
}, 180_000);

afterAll(async () => {
  await api?.close();
  await chain?.stop();
  if (TEST_DB === 'postgres') await testDb?.drop();
  else if (testDb) rmSync(testDb.location, { recursive: true, force: true });
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const call = (method: string, body: unknown) => rpc(api.app, `/rpc/Metadata/${method}`, body, { 'x-access-key': api.accessKey });
const admin = (method: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }) => rpc(api.app, `/rpc/Admin/${method}`, body, headers);

async function search(body: Record<string, unknown>): Promise<{ items: ContractInfoWire[]; nextPage: { page: number; pageSize: number; more: boolean } }> {
  const res = await call('SearchContracts', body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { items: res.body.contractInfo, nextPage: res.body.nextPage };
}
const key = (i: ContractInfoWire) => `${i.chainId}:${i.address}`;
const label = (i: ContractInfoWire) => `${i.chainId}:${i.name}:${i.symbol}`;

async function info(address: string): Promise<ContractInfoWire> {
  const res = await call('GetContractInfo', { chainID: 'anvil', contractAddress: address });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.contractInfo;
}

// ---------------------------------------------------------------- tests

describe('tokenlist import (CLI)', () => {
  it('imports the good entries of a ~2 900-entry list, reports the bad ones as skipped, with progress on stderr', async () => {
    expect(listTokens.length).toBeGreaterThan(2800);
    expect(JSON.parse(importRun.stdout)).toEqual({ list: LIST_NAME, imported: listTokens.length - BAD.length, skipped: BAD.length });
    const badAt = listTokens.indexOf(BAD[0]);
    expect(importRun.stderr).toContain(`skipped tokens[${badAt}]: address: not a 20-byte 0x address`);
    expect(importRun.stderr).toContain(`skipped tokens[${badAt + 1}]: decimals`);
    expect(importRun.stderr).toContain(`skipped tokens[${badAt + 2}]: symbol`);
    expect(importRun.stderr).toMatch(/importing \[#+\] 100% \d+\/\d+/);

    // The good neighbours of the bad entries are in; the bad ones are not.
    const before = GENERATED[999]!;
    const after = GENERATED[1000]!;
    for (const t of [before, after]) {
      const { items } = await search({ q: t.address });
      expect(items.map((i) => [i.chainId, i.name, i.symbol])).toEqual([[t.chainId, t.name, t.symbol]]);
    }
    expect((await search({ q: 'Broken Decimals Token' })).items.filter((i) => i.name === 'Broken Decimals Token')).toEqual([]);
    expect((await search({ q: BROKEN_DECIMALS })).items).toEqual([]);
  });

  it('refuses a file that is not a token list, or not JSON, with exit 2 and a clear message', () => {
    expect(badRuns.notList.code).toBe(2);
    expect(badRuns.notList.stderr).toContain('not-a-list.json is not a token list: expected {"tokens": [...]}');
    expect(badRuns.notList.stdout).toBe('');
    expect(badRuns.notJson.code).toBe(2);
    expect(badRuns.notJson.stderr).toMatch(/not-json\.json is not JSON/);
  });
});

describe('SearchContracts ranking', () => {
  it('puts an exact symbol first: "usdc" → USD Coin on mainnet', async () => {
    const { items } = await search({ q: 'usdc' });
    expect(label(items[0]!)).toBe('1:USD Coin:USDC');
    const exact = items.filter((i) => i.symbol === 'USDC');
    expect(items.slice(0, exact.length)).toEqual(exact);
    expect(exact.map((i) => i.chainId)).toEqual([1, 137, 31337, 31337]);
    // A bridged variant matches too, after the exact ones.
    expect(items.slice(exact.length).map((i) => i.symbol)).toContain('USDC.e');
  });

  it('ranks curated (listed) contracts before unknown ones within a tier, whatever the tiebreak would say', async () => {
    const { items } = await search({ q: 'USDC', chainID: 'anvil' });
    const fake = c.fakeUsdc.toLowerCase();
    const listed = '0xffffffffffffffffffffffffffffffffffff0001';
    // The premise: same tier, same name, and the fake's address sorts first.
    expect(fake < listed).toBe(true);
    expect(items.slice(0, 2).map((i) => [i.address, i.name, i.source])).toEqual([
      [listed, 'USD Coin', 'TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST'],
      [fake, 'USD Coin', 'FETCHER_ON_CHAIN_ERC20_INTERFACE'],
    ]);
    const uni = await search({ q: 'uni' });
    expect(uni.items.filter((i) => i.symbol === 'UNI').map((i) => [i.chainId, i.name])).toEqual([
      [1, 'Uniswap'],
      [137, 'Uniswap (PoS)'],
      [31337, 'Uniswap'],
    ]);
  });

  it('orders exact symbol, then name prefix, then full-text word matches: "aave"', async () => {
    const { items } = await search({ q: 'aave' });
    expect(items[0]!.symbol).toBe('AAVE');
    expect(
      items
        .slice(1, 3)
        .map((i) => i.name)
        .sort(),
    ).toEqual(['Aave Interest Bearing USDC', 'Aavegotchi']);
    expect(items[3]!.name).toBe('Staked Aave');
  });

  it('puts an exact name before names it is a prefix of', async () => {
    const { items } = await search({ q: 'wrapped ether' });
    expect(items.slice(0, 2).map(label)).toEqual(['1:Wrapped Ether:WETH', '137:Wrapped Ether:WETH']);
    const { items: prefix } = await search({ q: 'Wrapped', chainID: '1', page: { pageSize: 100 } });
    const firstOther = prefix.findIndex((i) => !i.name.toLowerCase().startsWith('wrapped'));
    expect(firstOther).toBe(-1);
    expect(prefix.length).toBe(WORDS.length + 1);
  });

  it('tolerates typos: "Unswap" finds Uniswap', async () => {
    const { items } = await search({ q: 'Unswap' });
    expect(items.length).toBeGreaterThan(0);
    expect(label(items[0]!)).toBe('1:Uniswap:UNI');
    expect(items.map(label)).toContain('137:Uniswap (PoS):UNI');
    const { items: typo2 } = await search({ q: 'wraped ether' });
    expect(typo2.slice(0, 2).map(label)).toEqual(['1:Wrapped Ether:WETH', '137:Wrapped Ether:WETH']);
  });
});

describe('SearchContracts filters and pages', () => {
  it('filters by chainID and chainIDs, given as names or numbers', async () => {
    const byName = await search({ q: 'usdc', chainID: 'polygon' });
    expect(byName.items.length).toBeGreaterThan(1);
    expect(new Set(byName.items.map((i) => i.chainId))).toEqual(new Set([137]));
    expect(label(byName.items[0]!)).toBe('137:USD Coin:USDC');
    expect((await search({ q: 'usdc', chainID: '137' })).items).toEqual(byName.items);
    expect((await search({ q: 'usdc', chainID: 137 })).items).toEqual(byName.items);
    expect((await search({ q: 'usdc', chainID: '0x89' })).items).toEqual(byName.items);

    const two = await search({ q: 'usdc', chainIDs: ['mainnet', 137] });
    expect(new Set(two.items.map((i) => i.chainId))).toEqual(new Set([1, 137]));

    const unknown = await call('SearchContracts', { q: 'usdc', chainID: 'no-such-chain' });
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ error: 'ChainNotFound' });
  });

  it('filters by type', async () => {
    const nft = await search({ q: 'uniswap', types: ['ERC721'] });
    expect(nft.items.map((i) => [i.address, i.type, i.name])).toEqual([[c.positions.toLowerCase(), 'ERC721', 'Uniswap V3 Positions NFT-V1']]);
    const fungible = await search({ q: 'uniswap', types: ['ERC20'] });
    expect(fungible.items.length).toBeGreaterThanOrEqual(3);
    expect(fungible.items.every((i) => i.type === 'ERC20')).toBe(true);
    expect(fungible.items.map((i) => i.address)).not.toContain(c.positions.toLowerCase());
    const both = await search({ q: 'uniswap', types: ['ERC20', 'ERC721'] });
    expect(both.items.length).toBe(fungible.items.length + 1);
  });

  it('walks every page of a broad query with no duplicate and no gap', async () => {
    const q = { q: 'staked', chainIDs: ['1'] };
    const big = await search({ ...q, page: { page: 0, pageSize: 100 } });
    expect(big.nextPage.more).toBe(false);
    // Every "Staked <word>" of the list on mainnet, and Staked Aave.
    expect(big.items.length).toBeGreaterThanOrEqual(WORDS.length + 1);
    const walked: ContractInfoWire[] = [];
    let page = 0;
    for (;;) {
      const res = await search({ ...q, page: { page, pageSize: 7 } });
      expect(res.nextPage).toMatchObject({ page: page + 1, pageSize: 7 });
      walked.push(...res.items);
      if (!res.nextPage.more) break;
      expect(res.items).toHaveLength(7);
      page = res.nextPage.page;
    }
    expect(page).toBe(Math.ceil(big.items.length / 7) - 1);
    expect(new Set(walked.map(key)).size).toBe(walked.length);
    expect(walked.map(key)).toEqual(big.items.map(key));
    // Past the end: empty, no more.
    const past = await search({ ...q, page: { page: page + 1, pageSize: 7 } });
    expect(past.items).toEqual([]);
    expect(past.nextPage.more).toBe(false);
  });

  it('ranks a two-letter prefix by tier, then shorter names first, and walks its pages with no duplicate and no gap', async () => {
    const q = { q: 'wR', chainIDs: ['1'] };
    const big = await search({ ...q, page: { page: 0, pageSize: 100 } });
    expect(big.nextPage.more).toBe(false);
    // Every "Wrapped <word>" of the list on mainnet, and Wrapped Ether.
    expect(big.items.filter((i) => i.name.startsWith('Wrapped ')).length).toBe(WORDS.length + 1);
    // The name-prefix tier (no symbol is "wr"), all from the token list (curated): no name longer than the one after it.
    const prefix = big.items.filter((i) => i.name.toLowerCase().startsWith('wr'));
    expect(big.items.slice(0, prefix.length)).toEqual(prefix);
    expect(new Set(prefix.map((i) => i.source))).toEqual(new Set(['TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST']));
    const lengths = prefix.map((i) => i.name.length);
    expect(lengths).toEqual([...lengths].sort((a, b) => a - b));
    const walked: ContractInfoWire[] = [];
    for (let page = 0; ; page++) {
      const res = await search({ ...q, page: { page, pageSize: 9 } });
      walked.push(...res.items);
      if (!res.nextPage.more) break;
    }
    expect(walked.map(key)).toEqual(big.items.map(key));
  });

  it('finds a contract by address in any case, on-chain (resolved on demand) and list-only chains', async () => {
    const lower = c.chainDollar.toLowerCase();
    for (const q of [c.chainDollar, lower, `0x${lower.slice(2).toUpperCase()}`]) {
      const { items } = await search({ q });
      expect(items.map((i) => [i.chainId, i.address, i.name, i.type])).toEqual([[31337, lower, 'Listed Dollar', 'ERC20']]);
    }
    // Never asked about before: read from the chain by the search itself.
    const { items: nft } = await search({ q: c.chainGallery });
    expect(nft.map((i) => [i.address, i.type, i.deployed])).toEqual([[c.chainGallery.toLowerCase(), 'ERC721', true]]);
    // A mainnet token this server has no RPC for is found from the token list.
    const { items: usdc } = await search({ q: MAINNET_USDC });
    expect(usdc.map(label)).toEqual(['1:USD Coin:USDC']);
    expect((await search({ q: MAINNET_USDC.toLowerCase(), chainID: 'polygon' })).items).toEqual([]);
    expect((await search({ q: MAINNET_USDC, chainID: 'mainnet' })).items.map(label)).toEqual(['1:USD Coin:USDC']);
    expect((await search({ q: c.chainDollar, types: ['ERC721'] })).items).toEqual([]);
  });
});

describe('precedence of the layers', () => {
  it('a token list beats the chain for name, symbol and logo; the chain wins for decimals and type', async () => {
    expect(await info(c.chainDollar)).toMatchObject({
      name: 'Listed Dollar',
      symbol: 'LSD',
      logoURI: 'https://logos.example/lsd.png',
      decimals: 6, // chain says 6, the list 18
      type: 'ERC20',
      deployed: true,
      source: 'TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST',
    });
    const gallery = await info(c.chainGallery);
    expect(gallery).toMatchObject({ name: 'Listed Gallery', symbol: 'LGAL', logoURI: 'https://logos.example/lgal.png', type: 'ERC721' });
    // Extensions: the list's description beats the contractURI document's; the document's link stays.
    expect(gallery.extensions).toMatchObject({ description: 'from the list', link: 'https://gallery.example' });
    // Search serves the merged record too.
    const { items } = await search({ q: 'Listed Gallery' });
    expect(items[0]).toMatchObject({ address: c.chainGallery.toLowerCase(), name: 'Listed Gallery', type: 'ERC721' });
  });

  it('serves ipfs:// logos of lists and overrides as HTTP URLs through the configured gateway', async () => {
    const uniLogo = `${IPFS_GATEWAY}QmXttGpZrECX5qCyXbBQiqgQNytVGeZW5Anewvh2jc4psg`;
    const { items } = await search({ q: 'uni', chainID: 'mainnet' });
    expect(items[0]).toMatchObject({ name: 'Uniswap', logoURI: uniLogo });
    const found = await call('FindContractInfo', { contractAddress: '0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984' });
    expect(found.body.contractInfoList.map((i: ContractInfoWire) => [i.chainId, i.logoURI])).toEqual([[1, uniLogo]]);
    expect((await search({ q: '0x1f9840a85d5aF5bf1D1762F925BDADdC4201F984' })).items[0]!.logoURI).toBe(uniLogo);
    const local = await info('0xffffffffffffffffffffffffffffffffffff0001');
    expect(local).toMatchObject({ name: 'USD Coin', deployed: false, logoURI: `${IPFS_GATEWAY}QmLocalUsdcLogo/usdc.svg` });
    const rest = await api.app.inject({ method: 'GET', url: '/tokens/anvil/0xffffffffffffffffffffffffffffffffffff0001' });
    expect(JSON.parse(rest.body).logoURI).toBe(`${IPFS_GATEWAY}QmLocalUsdcLogo/usdc.svg`);
  });
});

describe('overrides', () => {
  it('a CLI override beats the list and the chain', async () => {
    expect(overrideRun.code, overrideRun.stderr).toBe(0);
    expect(JSON.parse(overrideRun.stdout)).toMatchObject({ chainId: 31337, address: c.pinned.toLowerCase(), name: 'Pinned Dollar', symbol: 'PIN', decimals: 2 });
    const got = await info(c.pinned);
    expect(got).toMatchObject({
      name: 'Pinned Dollar',
      symbol: 'PIN',
      decimals: 2,
      logoURI: 'https://logos.example/pin.png',
      type: 'ERC20',
      deployed: true,
      source: 'FETCHER_TOKEN_DIRECTORY_ADMIN',
    });
    expect(got.extensions).toMatchObject({ description: 'Pinned by the operator', verified: true });
    const found = await admin('GetContractInfoOverride', { chainID: '31337', contractAddress: c.pinned });
    expect(found.status).toBe(200);
    expect(found.body.contractInfoOverride).toMatchObject({ name: 'Pinned Dollar', symbol: 'PIN', decimals: 2 });
  });

  it('the Admin API authorises operator tokens only', async () => {
    const body = { chainID: 'anvil' };
    const anonymous = await admin('GetContractInfoOverrides', body, {});
    expect(anonymous.status).toBe(401);
    expect(anonymous.body).toMatchObject({ error: 'Unauthorized', code: 1000 });
    const projectKey = await admin('GetContractInfoOverrides', body, { 'x-access-key': api.accessKey });
    expect(projectKey.status).toBe(403);
    expect(projectKey.body).toMatchObject({ error: 'PermissionDenied', code: 1001 });
    const wrong = await admin('GetContractInfoOverrides', body, { authorization: `Bearer ${ADMIN_TOKEN}x` });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ error: 'Unauthorized', code: 1000 });
    const wrongWithKey = await admin('GetContractInfoOverrides', body, { authorization: 'Bearer not-the-admin-token-at-all', 'x-access-key': api.accessKey });
    expect(wrongWithKey.status).toBe(401);
    const right = await admin('GetContractInfoOverrides', body);
    expect(right.status).toBe(200);
    // Writes are guarded the same way.
    const write = await admin('AddContractInfoOverride', { chainID: 'anvil', contractAddress: c.adminTarget, contractInfoOverride: { name: 'x' } }, { 'x-access-key': api.accessKey });
    expect(write.status).toBe(403);
    expect((await info(c.adminTarget)).name).toBe('Admin Listed');
  });

  it('Admin Add / Get / list / Update / Remove: the override beats both layers, and removing it restores them', async () => {
    const target = { chainID: 'anvil', contractAddress: c.adminTarget };
    expect(await info(c.adminTarget)).toMatchObject({ name: 'Admin Listed', symbol: 'ALS', decimals: 6, type: 'ERC20' });

    const add = await admin('AddContractInfoOverride', {
      ...target,
      contractInfoOverride: { name: 'Admin Pinned', decimals: 4, logoURI: 'ipfs://QmAdminLogo/admin.png', extensions: { verified: true, description: 'by admin' } },
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    const pinned = await info(c.adminTarget);
    expect(pinned).toMatchObject({ name: 'Admin Pinned', symbol: 'ALS', decimals: 4, logoURI: `${IPFS_GATEWAY}QmAdminLogo/admin.png`, type: 'ERC20', source: 'FETCHER_TOKEN_DIRECTORY_ADMIN' });
    expect(pinned.extensions).toMatchObject({ verified: true, description: 'by admin' });
    expect((await search({ q: 'Admin Pinned' })).items[0]).toMatchObject({ address: c.adminTarget.toLowerCase(), name: 'Admin Pinned' });

    const again = await admin('AddContractInfoOverride', { ...target, contractInfoOverride: { name: 'twice' } });
    expect(again.status).toBe(409);
    expect(again.body).toMatchObject({ error: 'RequestConflict' });

    const got = await admin('GetContractInfoOverride', target);
    expect(got.body.contractInfoOverride).toEqual({
      name: 'Admin Pinned',
      type: null,
      symbol: null,
      decimals: 4,
      logoURI: 'ipfs://QmAdminLogo/admin.png', // as the operator wrote it
      extensions: { verified: true, description: 'by admin' },
    });
    const list = await admin('GetContractInfoOverrides', { chainID: 'anvil', page: { pageSize: 100 } });
    expect(list.status).toBe(200);
    expect(list.body.contractInfoOverrides.map((o: { contractAddress: string }) => o.contractAddress).sort()).toEqual([c.adminTarget, c.pinned].map((a) => a.toLowerCase()).sort());

    // Update replaces the override: the name falls back to the list, the type is pinned.
    const upd = await admin('UpdateContractInfoOverride', { ...target, contractInfoOverride: { symbol: 'ADMN', type: 'ERC721' } });
    expect(upd.status).toBe(200);
    expect(await info(c.adminTarget)).toMatchObject({ name: 'Admin Listed', symbol: 'ADMN', decimals: 6, type: 'ERC721', logoURI: `https://logos.example/31337/${c.adminTarget.toLowerCase()}.png` });

    const rm = await admin('RemoveContractInfoOverride', target);
    expect(rm.status).toBe(200);
    const restored = await info(c.adminTarget);
    expect(restored).toMatchObject({ name: 'Admin Listed', symbol: 'ALS', decimals: 6, type: 'ERC20', source: 'TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST' });
    expect(restored.extensions.verified).toBeUndefined();
    expect((await admin('GetContractInfoOverride', target)).body).toMatchObject({ error: 'NotFound' });
    expect((await admin('RemoveContractInfoOverride', target)).body).toMatchObject({ error: 'NotFound' });
  });

  it('writers of different layers at the same moment (a list import, an operator, a chain read) lose nothing', async () => {
    // Each writer reads the stored layers, merges and writes: without a lock, the last one to
    // write drops the layer the other just wrote.
    const store = api.services.contractStore;
    const targets = Array.from({ length: 5 }, (_, i) => `0x${(0xace0 + i).toString(16).padStart(40, '0')}` as Address);
    await Promise.all(
      targets.flatMap((address, i) => [
        importTokenList(store, { name: 'Race List', tokens: [tok(31337, address, `Race Listed ${i}`, `RL${i}`, 8)] }),
        store.upsertLayers(31337, [{ address, override: { symbol: `RO${i}` } }]),
        api.services.contracts.refresh(api.services.chains.get(31337)!, [address]),
      ]),
    );
    const { contractInfoMap } = (await call('GetContractInfoBatch', { chainID: 'anvil', contractAddresses: targets })).body;
    targets.forEach((address, i) => {
      expect(contractInfoMap[address]).toMatchObject({ name: `Race Listed ${i}`, symbol: `RO${i}`, decimals: 8, source: 'FETCHER_TOKEN_DIRECTORY_ADMIN' });
    });
    const rows = await store.getMany(31337, targets);
    for (const address of targets) {
      const row = rows.get(address)!;
      expect(row.list_layer).toMatchObject({ list: 'Race List' });
      expect(row.override_layer).toMatchObject({ symbol: expect.stringMatching(/^RO/) });
      expect(row.chain_layer).toMatchObject({ deployed: false });
      expect(row.info_fetched_at).not.toBeNull();
    }
  });

  // Last: on PGlite the service steps aside while the CLI runs.
  it('contracts override --clear restores the list and chain layers', async () => {
    const res = await cliWhileServing(['contracts', 'override', '--chain', '31337', '--address', c.pinned.toUpperCase().replace('0X', '0x'), '--clear']);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({ name: 'Pinned Listed', symbol: 'PLS', decimals: 6 });
    const got = await info(c.pinned);
    expect(got).toMatchObject({ name: 'Pinned Listed', symbol: 'PLS', decimals: 6, type: 'ERC20', source: 'TOKEN_DIRECTORY_PUBLIC_TOKEN_LIST' });
    expect(got.extensions.verified).toBeUndefined();
    expect((await admin('GetContractInfoOverride', { chainID: 'anvil', contractAddress: c.pinned })).body).toMatchObject({ error: 'NotFound' });
  });
});
