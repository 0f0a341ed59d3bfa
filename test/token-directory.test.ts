// The token directory end to end through the official @0xsequence/metadata client (Metadata and
// Admin): token lists feed it, admins curate it (add, remove, feature), testnets hide unless asked,
// paging is stable, search stays inside it, an admin's removal survives the next list import, and
// the bulk refreshes queue exactly the stale records. Judged by the stored rows where it matters.

import { Admin, SequenceMetadata } from '@0xsequence/metadata';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contractStore } from '../src/metadata/contracts/contract-store.ts';
import { directoryStore } from '../src/metadata/contracts/directory-store.ts';
import { importTokenList } from '../src/metadata/contracts/token-list.ts';
import { bearer, consoleClient } from './console/support.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, startTokenChain, type TokenChain } from './support/token-chain.ts';

const ADMIN_TOKEN = 'directory-admin-token-0123456789abcdef';
const MAINNET_A = '0x00000000000000000000000000000000000000a1';
const MAINNET_B = '0x00000000000000000000000000000000000000b2';
const SEPOLIA_C = '0x00000000000000000000000000000000000000c3';

let chain: TokenChain;
let t: TestService;
let url: string;
let client: SequenceMetadata;
let admin: Admin;
let alpha: Address; // ERC20 "Alpha Coin", in the directory
let beta: Address; // ERC20 "Beta Coin", in the directory
let gamma: Address; // ERC721 "Gamma Collection", in the directory
let outsider: Address; // ERC20 "Alpha Outsider", never in the directory

const list = {
  name: 'Directory Test List',
  tokens: [
    { chainId: 1, address: MAINNET_A, name: 'Mainnet Alpha', symbol: 'MNA', decimals: 18 },
    { chainId: 1, address: MAINNET_B, name: 'Mainnet Bravo', symbol: 'MNB', decimals: 6 },
    { chainId: 11155111, address: SEPOLIA_C, name: 'Sepolia Charlie', symbol: 'SPC', decimals: 18 },
    { chainId: 1, address: 'not an address', name: 'Broken', symbol: 'BRK', decimals: 18 },
  ],
};

const importList = () => importTokenList(contractStore(t.services.db), list, { directory: directoryStore(t.services.db) });
const anvilId = () => chain.anvil.chainId;

beforeAll(async () => {
  chain = await startTokenChain();
  [alpha, beta, outsider, gamma] = (
    await chain.deploy([
      { contract: 'DevERC20', args: ['Alpha Coin', 'ALP'] },
      { contract: 'DevERC20', args: ['Beta Coin', 'BET'] },
      { contract: 'DevERC20', args: ['Alpha Outsider', 'AOU'] },
      { contract: 'DevERC721', args: ['Gamma Collection', 'GAM', 'http://127.0.0.1:1/', ''] },
    ])
  ).map((a) => a.toLowerCase() as Address);
  t = await startTestService({ chains: [chain.chainConfig], admin: { tokens: [ADMIN_TOKEN] }, refresh: { pollMs: 50 } });
  url = await t.app.listen({ port: 0, host: '127.0.0.1' });
  client = new SequenceMetadata(url, t.accessKey);
  admin = new Admin(url, (input, init) => fetch(input, { ...init, headers: { ...init?.headers, authorization: `Bearer ${ADMIN_TOKEN}` } }));
  t.services.startBackground();
}, 180_000);

afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('token directory', () => {
  it('is fed by a token list: networks without testnets unless asked; the bad entry is skipped alone', async () => {
    const r = await importList();
    expect(r.imported).toBe(3);
    expect(r.skipped.map((s) => s.index)).toEqual([3]);

    expect(await client.getTokenDirectoryNetworks({})).toEqual({ chainIDs: [1], networks: ['mainnet'] });
    expect(await client.getTokenDirectoryNetworks({ includeTestnets: true })).toEqual({ chainIDs: [1, 11155111], networks: ['mainnet', 'sepolia'] });
    // Nothing is featured yet.
    expect(await client.getTokenDirectoryNetworks({ onlyFeatured: true })).toEqual({ chainIDs: [], networks: [] });

    const mainnet = await client.getTokenDirectory({ chainID: 'mainnet' });
    expect(mainnet.contracts.map((c) => [c.address, c.name, c.symbol, c.extensions.featured, c.extensions.featureIndex])).toEqual([
      [MAINNET_A, 'Mainnet Alpha', 'MNA', false, 0],
      [MAINNET_B, 'Mainnet Bravo', 'MNB', false, 0],
    ]);
    expect(mainnet.page).toMatchObject({ more: false });
    // An explicitly named testnet is answered.
    expect((await client.getTokenDirectory({ chainID: 'sepolia' })).contracts.map((c) => c.address)).toEqual([SEPOLIA_C]);
  });

  it('is curated by admins through the official Admin client: added contracts are read from the chain, featured ones come first', async () => {
    for (const a of [alpha, beta, gamma]) expect(await admin.addContractToTokenDirectory({ chainID: 'anvil', contractAddress: a })).toEqual({ ok: true });
    expect(await admin.setTokenDirectoryFeatureIndex({ chainID: 'anvil', contractAddress: gamma, featureIndex: 2 })).toEqual({ ok: true });
    expect(await admin.setTokenDirectoryFeatureIndex({ chainID: String(anvilId()), contractAddress: beta, featureIndex: 1 })).toEqual({ ok: true });
    expect(await admin.isInTokenDirectory({ chainID: 'anvil', contractAddress: gamma })).toEqual({ ok: true, featureIndex: 2 });
    expect(await admin.isInTokenDirectory({ chainID: 'anvil', contractAddress: outsider })).toEqual({ ok: false, featureIndex: 0 });

    // Anvil is a testnet in the network registry: hidden unless asked for, by name or with includeTestnets.
    expect((await client.getTokenDirectoryNetworks({})).chainIDs).toEqual([1]);
    expect((await client.getTokenDirectoryNetworks({ includeTestnets: true })).chainIDs).toEqual([1, anvilId(), 11155111]);
    expect(await client.getTokenDirectoryNetworks({ onlyFeatured: true, includeTestnets: true })).toEqual({ chainIDs: [anvilId()], networks: ['anvil'] });

    const page = await eventually(
      () => client.getTokenDirectory({ chainID: 'anvil' }),
      (p) => expect(p.contracts.map((c) => c.name)).toEqual(['Beta Coin', 'Gamma Collection', 'Alpha Coin']),
      20_000,
    );
    expect(page.contracts.map((c) => [c.address, c.type, c.extensions.featured, c.extensions.featureIndex])).toEqual([
      [beta, 'ERC20', true, 1],
      [gamma, 'ERC721', true, 2],
      [alpha, 'ERC20', false, 0],
    ]);
    const featured = await client.getTokenDirectory({ chainID: 'anvil', onlyFeatured: true });
    expect(featured.contracts.map((c) => c.address)).toEqual([beta, gamma]);
  });

  it('pages the whole directory in a stable order, without repeats or gaps', async () => {
    const seen: string[] = [];
    let page = 0;
    for (;;) {
      const r = await client.getTokenDirectory({ includeTestnets: true, page: { page, pageSize: 2 } });
      seen.push(...r.contracts.map((c) => `${c.chainId}:${c.address}`));
      expect(r.page).toMatchObject({ page: page + 1, pageSize: 2 });
      if (!r.page.more) break;
      page++;
    }
    const all = (await client.getTokenDirectory({ includeTestnets: true, page: { pageSize: 100 } })).contracts.map((c) => `${c.chainId}:${c.address}`);
    expect(seen).toEqual(all);
    expect(new Set(seen).size).toBe(6);
    // Featured entries lead across chains, then chain by chain.
    expect(all.slice(0, 2)).toEqual([`${anvilId()}:${beta}`, `${anvilId()}:${gamma}`]);
  });

  it('searches inside the directory only: a contract outside it is found by contract search, not here', async () => {
    await client.getContractInfo({ chainID: 'anvil', contractAddress: outsider });
    await eventually(
      () => rpc(t.app, '/rpc/Metadata/SearchContracts', { q: 'alpha', chainID: 'anvil' }, { 'x-access-key': t.accessKey }),
      (r) => expect(r.body.contractInfo.map((c: { address: string }) => c.address)).toContain(outsider),
      20_000,
    );
    const found = await client.searchTokenDirectory({ query: 'alpha', chainID: anvilId() });
    expect(found.contracts.map((c) => [c.address, c.extensions.featureIndex])).toEqual([[alpha, 0]]);
    const typo = await client.searchTokenDirectory({ query: 'gamma colection', includeTestnets: true });
    expect(typo.contracts.map((c) => c.address)).toEqual([gamma]);
    // Without includeTestnets the anvil entries are not searched.
    expect((await client.searchTokenDirectory({ query: 'alpha' })).contracts.map((c) => c.address)).toEqual([MAINNET_A]);
    const featuredOnly = await client.searchTokenDirectory({ query: 'alpha', onlyFeatured: true, includeTestnets: true });
    expect(featuredOnly.contracts).toEqual([]);
  });

  it("keeps an admin's removal when the token list is imported again; an admin's add brings it back", async () => {
    expect(await admin.removeContractFromTokenDirectory({ chainID: 'mainnet', contractAddress: MAINNET_B })).toEqual({ ok: true });
    expect(await admin.removeContractFromTokenDirectory({ chainID: 'mainnet', contractAddress: MAINNET_B })).toEqual({ ok: false });
    await importList();
    const stored = await t.services.db.query<{ removed: boolean }>('SELECT removed FROM token_directory WHERE chain_id = 1 AND address = $1', [MAINNET_B]);
    expect(stored.rows).toEqual([{ removed: true }]);
    expect((await client.getTokenDirectory({ chainID: '1' })).contracts.map((c) => c.address)).toEqual([MAINNET_A]);

    expect(await admin.addContractToTokenDirectory({ chainID: 'mainnet', contractAddress: MAINNET_B })).toEqual({ ok: true });
    expect((await client.getTokenDirectory({ chainID: '1' })).contracts.map((c) => c.address)).toEqual([MAINNET_A, MAINNET_B]);
  });

  it('answers the deprecated names older SDKs call', async () => {
    const md = (m: string, body: unknown) => rpc(t.app, `/rpc/Metadata/${m}`, body, { 'x-access-key': t.accessKey });
    const ad = (m: string, body: unknown) => rpc(t.app, `/rpc/Admin/${m}`, body, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect((await md('DirectoryGetNetworks', { onlyFeatured: true, includeTestnets: true })).body).toEqual({ networks: [anvilId()] });
    const cols = await md('DirectoryGetCollections', { chainId: anvilId(), onlyFeatured: true });
    expect(cols.body.collections.map((c: { address: string }) => c.address)).toEqual([beta, gamma]);
    const found = await md('DirectorySearchCollections', { query: 'beta', includeTestnets: true });
    expect(found.body.collections.map((c: { address: string }) => c.address)).toEqual([beta]);

    expect((await ad('ModifyFeatureIndex', { chainHandle: 'anvil', contractAddress: alpha, featured: 3 })).body).toEqual({ ok: true });
    expect((await ad('GetFeatureIndex', { chainHandle: 'anvil', contractAddress: alpha })).body).toEqual({ featured: 3 });
    const listed = await ad('ListTokenDirectory', { chainID: anvilId(), onlyFeatured: true });
    expect(listed.body.collections.map((c: { address: string }) => c.address)).toEqual([beta, gamma, alpha]);

    const added = await ad('AddContractsToTokenDirectory', { contracts: [{ chainId: anvilId(), address: outsider }], featureIndexes: [9] });
    expect(added.body).toEqual({ ok: true });
    expect(await admin.isInTokenDirectory({ chainID: 'anvil', contractAddress: outsider })).toEqual({ ok: true, featureIndex: 9 });
    expect((await ad('RemoveContractsFromTokenDirectory', { chainHandle: 'anvil', contracts: [outsider] })).body).toEqual({ ok: true });
    expect(await admin.isInTokenDirectory({ chainID: 'anvil', contractAddress: outsider })).toEqual({ ok: false, featureIndex: 0 });
  });

  it('refuses bad input with clear errors and changes nothing', async () => {
    const ad = (m: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${ADMIN_TOKEN}` }) => rpc(t.app, `/rpc/Admin/${m}`, body, headers);
    const before = (await t.services.db.query('SELECT chain_id, address, feature_index, removed FROM token_directory ORDER BY 1, 2')).rows;

    const tooBig = await ad('SetTokenDirectoryFeatureIndex', { chainID: 'anvil', contractAddress: beta, featureIndex: 300 });
    expect([tooBig.status, tooBig.body.error]).toEqual([400, 'InvalidArgument']);
    expect(tooBig.body.cause).toMatch(/uint8/);
    const unlisted = await ad('SetTokenDirectoryFeatureIndex', { chainID: 'anvil', contractAddress: outsider, featureIndex: 1 });
    expect([unlisted.status, unlisted.body.error]).toEqual([400, 'NotFound']);
    const noToken = await ad('AddContractToTokenDirectory', { chainID: 'anvil', contractAddress: outsider }, { 'x-access-key': t.accessKey });
    expect([noToken.status, noToken.body.error]).toEqual([403, 'PermissionDenied']);
    const badChain = await ad('AddContractToTokenDirectory', { chainID: 'atlantis', contractAddress: outsider });
    expect(badChain.body.error).toBe('ChainNotFound');
    const badAddress = await ad('AddContractToTokenDirectory', { chainID: 'anvil', contractAddress: '0x1234' });
    expect([badAddress.status, badAddress.body.error]).toEqual([400, 'InvalidArgument']);
    const mismatched = await ad('AddContractsToTokenDirectory', { contracts: [{ chainId: anvilId(), address: outsider }], featureIndexes: [1, 2] });
    expect([mismatched.status, mismatched.body.error]).toEqual([400, 'InvalidArgument']);
    const hugePage = await rpc(t.app, '/rpc/Metadata/GetTokenDirectory', { page: { pageSize: 5000 } }, { 'x-access-key': t.accessKey });
    // A page size above the cap is answered with the most it allows, as Sequence's servers do.
    expect([hugePage.status, hugePage.body.page?.pageSize]).toEqual([200, 100]);
    const emptyQuery = await rpc(t.app, '/rpc/Metadata/SearchTokenDirectory', { query: '  ' }, { 'x-access-key': t.accessKey });
    expect([emptyQuery.status, emptyQuery.body.error]).toEqual([400, 'InvalidArgument']);

    expect((await t.services.db.query('SELECT chain_id, address, feature_index, removed FROM token_directory ORDER BY 1, 2')).rows).toEqual(before);
  });

  it('queues refreshes of the whole directory and of records written before a time, and the worker runs them', async () => {
    const items = async (taskIds: number[]) =>
      (await t.services.db.query<{ item: string }>('SELECT item FROM task_items WHERE task_id = ANY($1::bigint[]) ORDER BY item', [taskIds])).rows.map((r) => r.item);
    // The raw answer: the official client keeps only taskID.
    const dir = (await rpc(t.app, '/rpc/Admin/RefreshTokenDirectory', {}, { authorization: `Bearer ${ADMIN_TOKEN}` })).body as { taskID: number; taskIDs: number[] };
    expect((await admin.refreshTokenDirectory()).taskID).toBeGreaterThan(dir.taskID);
    // Only the chain this server reads can be refreshed: mainnet and sepolia entries have no RPC here.
    expect(dir.taskIDs).toEqual([dir.taskID]);
    expect(await items([dir.taskID])).toEqual([alpha, beta, gamma].sort());
    await eventually(
      () => t.services.db.query<{ status: string }>('SELECT status FROM tasks WHERE id = $1', [dir.taskID]),
      (r) => expect(r.rows[0]?.status).toBe('DONE'),
      20_000,
    );

    const cut = new Date(Date.now() + 1_000);
    const stale = await admin.refreshContractInfoUpdatedBefore({ before: cut.toISOString(), maxContractNumber: 2 });
    expect(await items(stale.taskIDs)).toHaveLength(2);
    const none = await admin.refreshContractInfoUpdatedBefore({ before: '2000-01-01T00:00:00Z', maxContractNumber: 100 });
    expect(none.taskIDs).toEqual([]);
    const badDate = await rpc(t.app, '/rpc/Admin/RefreshTokenMetadataUpdatedBefore', { before: 'yesterday-ish', maxTokenNumber: 5 }, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect([badDate.status, badDate.body.error]).toEqual([400, 'InvalidArgument']);
  });

  it("is curated from the console: the page's list shows testnets flagged, and edits reach the Metadata answers", async () => {
    const call = consoleClient(t.app);
    const c = (m: string, body: unknown) => call(m, body, bearer(ADMIN_TOKEN));
    const listed = await c('ListDirectory', { chainID: 'anvil' });
    expect(listed.status).toBe(200);
    expect(listed.body.entries.map((e: { address: string; network: string; testnet: boolean }) => [e.address, e.network, e.testnet])).toEqual([
      [beta, 'anvil', true],
      [gamma, 'anvil', true],
      [alpha, 'anvil', true],
    ]);
    expect((await c('SetDirectoryFeatureIndex', { chainID: 'anvil', contractAddress: alpha, featureIndex: 0 })).status).toBe(200);
    expect((await c('SetDirectoryFeatureIndex', { chainID: 'anvil', contractAddress: gamma, featureIndex: 0 })).status).toBe(200);
    expect((await client.getTokenDirectory({ chainID: 'anvil', onlyFeatured: true })).contracts.map((x) => x.address)).toEqual([beta]);
    expect((await c('RemoveFromDirectory', { chainID: 'anvil', contractAddress: beta })).status).toBe(200);
    const again = await c('RemoveFromDirectory', { chainID: 'anvil', contractAddress: beta });
    expect([again.status, again.body.error]).toEqual([400, 'NotFound']);
    expect((await c('AddToDirectory', { chainID: 'anvil', contractAddress: outsider, featureIndex: 4 })).status).toBe(200);
    // Featured first, then by name: "Alpha Coin", "Gamma Collection".
    expect((await client.getTokenDirectory({ chainID: 'anvil' })).contracts.map((x) => [x.address, x.extensions.featureIndex])).toEqual([
      [outsider, 4],
      [alpha, 0],
      [gamma, 0],
    ]);
    const unsigned = await call('ListDirectory', {});
    expect(unsigned.status).toBe(401);
  });
});
