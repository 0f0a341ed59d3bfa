// Issue #55, key kinds as Sequence users know them: a publishable key (the one that ships in the dapp)
// reads and relays but cannot write the project's state; a secret key writes, through the official
// clients as Sequence's builder API is called (SequenceCollections with the key as its bearer,
// SequenceIndexer's listener methods with it as jwtAuth), and is refused when a browser sends it. A
// publishable key held to origins is refused from any other. Each refusal is judged by the stored rows.

import { SequenceIndexer } from '@0xsequence/indexer';
import { SequenceCollections, SequenceMetadata } from '@0xsequence/metadata';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorOf, uploadFile } from './support/collections.ts';
import { noisyPng, solidPng } from './support/media.ts';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { ANVIL_DEPLOYER_KEY } from '../src/devchain/index.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, getRest, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';

const DEPLOYER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const APP = 'https://app.example';
const EVIL = 'https://evil.example';

let chain: TokenChain;
let t: TestService;
let docs: RawServer;
let base: string;
let nft: Address;
/** A publishable key held to APP. */
let webKey: string;

const count = async (table: string) => Number((await t.services.db.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`)).rows[0]!.n);

beforeAll(async () => {
  chain = await startTokenChain();
  docs = await startRawServer((_req, res, url) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name: `Token ${url.pathname.slice(1)}` }));
  });
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
    webhooks: { allowedPrivateHosts: ['127.0.0.1'] },
    // Small enough to reach in a test; every test below leaves the project empty again.
    collections: { quotas: { collections: 3, tokens: 4, assets: 3, links: 2, bytes: 20_000 }, uploads: { perMinute: 1, burst: 4 } },
  });
  base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  t.services.startBackground();
  [nft] = (await chain.deploy([{ contract: 'DevERC721', args: ['Keys', 'KEY', `${docs.url}/`, `${docs.url}/contract`] }])).map((a) => a.toLowerCase() as Address);
  await chain.send([{ address: nft!, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, 1n] }]);
  webKey = (await t.services.accessKeys.create(t.project.id, 'web', { allowedOrigins: [APP] })).key;
}, 120_000);

afterAll(async () => {
  await t?.close();
  await docs?.stop();
  await chain?.stop();
});

describe('publishable keys read, secret keys write', () => {
  it('every Collections write (and read of unpublished work) is refused with the publishable key, stores nothing, and is taken with the secret key', async () => {
    const pub = new SequenceCollections(base, t.accessKey);
    const sec = new SequenceCollections(base, t.secretKey);
    expect(await errorOf(pub.createCollection({ collection: { metadata: { name: 'Stolen' } } as never }))).toMatchObject({ code: 1001, status: 403 });
    expect(await count('collections')).toBe(0);

    const { collection } = await sec.createCollection({ collection: { metadata: { name: 'Ours' } } as never });
    await sec.createToken({ collectionId: collection.id, token: { tokenId: '1', name: 'One' } as never });
    const { asset } = await sec.createAsset({ asset: { collectionId: collection.id, tokenId: '1', metadataField: 'image' } as never });
    const link = { chainId: chain.anvil.chainId, contractAddress: nft, collectionId: collection.id };
    const id = collection.id;
    for (const call of [
      () => pub.getCollection({ collectionId: id }),
      () => pub.listCollections({}),
      () => pub.updateCollection({ collection: { id, metadata: { name: 'Stolen' } } as never }),
      () => pub.deleteCollection({ collectionId: id }),
      () => pub.publishCollection({ collectionId: id }),
      () => pub.unpublishCollection({ collectionId: id }),
      () => pub.createToken({ collectionId: id, token: { tokenId: '2', name: 'x' } as never }),
      () => pub.updateToken({ collectionId: id, tokenId: '1', token: { tokenId: '1', name: 'Stolen', external_url: 'javascript:alert(2)' } as never }),
      () => pub.deleteToken({ collectionId: id, tokenId: '1' }),
      () => pub.createAsset({ asset: { collectionId: id, tokenId: '1', metadataField: 'animation_url' } as never }),
      () => pub.updateAsset({ asset: { id: asset.id, collectionId: id, metadataField: 'audio' } as never }),
      () => pub.deleteAsset({ assetId: asset.id }),
      () => pub.createContractCollection({ contractCollection: link } as never),
      () => pub.updateContractCollection({ contractCollection: link } as never),
      () => pub.deleteContractCollection({ chainId: link.chainId, contractAddress: nft } as never),
    ]) {
      expect(await errorOf(call())).toMatchObject({ code: 1001, status: 403 });
    }
    // The same key in X-Access-Key, as a hand-written client would send it.
    const raw = await rpc(t.app, '/rpc/Collections/DeleteCollection', { collectionId: id }, { 'x-access-key': t.accessKey });
    expect(raw.body).toMatchObject({ error: 'PermissionDenied', code: 1001 });
    const up = await uploadFile(base, `/projects/${t.project.id}/collections/${id}/tokens/1/upload/${asset.id}`, await solidPng(8, 8), 'x.png', t.accessKey);
    expect(up).toMatchObject({ status: 403, body: { error: 'PermissionDenied' } });

    // The rows are as the secret key left them.
    const rows = await t.services.db.query<{ name: string; private: boolean }>(`SELECT metadata->>'name' AS name, private FROM collections`);
    expect(rows.rows).toEqual([{ name: 'Ours', private: true }]);
    expect((await t.services.db.query<{ name: string }>(`SELECT metadata->>'name' AS name FROM collection_tokens`)).rows).toEqual([{ name: 'One' }]);
    expect(await count('collection_assets')).toBe(1);
    expect(await count('contract_collections')).toBe(0);
    expect((await t.services.db.query(`SELECT 1 FROM collection_assets WHERE sha256 IS NOT NULL`)).rows).toEqual([]);

    // And the secret key does all of it.
    expect((await uploadFile(base, `/projects/${t.project.id}/collections/${id}/tokens/1/upload/${asset.id}`, await solidPng(8, 8), 'x.png', t.secretKey)).status).toBe(200);
    expect((await sec.updateToken({ collectionId: id, tokenId: '1', token: { tokenId: '1', name: 'Uno' } as never })).token.name).toBe('Uno');
    expect((await sec.publishCollection({ collectionId: id })).collection.private).toBe(false);
    expect((await sec.deleteToken({ collectionId: id, tokenId: '1' })).status).toBe(true);
    expect((await sec.deleteCollection({ collectionId: id })).status).toBe(true);
    expect(await count('collections')).toBe(0);
  });

  it("the indexer's webhook listeners are refused with the publishable key (in either header) and written with the secret key", async () => {
    const url = `${base}/indexer/anvil`;
    const asKey = new SequenceIndexer(url, t.accessKey);
    const asJwt = new SequenceIndexer(url, undefined, t.accessKey);
    const sec = new SequenceIndexer(url, t.accessKey, t.secretKey);
    const hook = { url: `${docs.url}/hook`, filters: { accounts: [DEPLOYER] } };
    for (const c of [asKey, asJwt]) {
      expect(await errorOf(c.addWebhookListener(hook))).toMatchObject({ code: 1001, status: 403 });
      expect(await errorOf(c.getAllWebhookListeners({}))).toMatchObject({ code: 1001 });
    }
    expect(await count('indexer_listeners')).toBe(0);
    const { listener } = await sec.addWebhookListener(hook);
    for (const call of [
      () => asKey.getWebhookListener({ id: listener.id }),
      () => asKey.updateWebhookListener({ listener: { ...listener, url: `${EVIL}/hook` } }),
      () => asKey.toggleWebhookListener({ id: listener.id }),
      () => asKey.pauseAllWebhookListeners({}),
      () => asKey.removeWebhookListener({ id: listener.id }),
      () => asKey.removeAllWebhookListeners({}),
    ]) {
      expect(await errorOf(call())).toMatchObject({ code: 1001, status: 403 });
    }
    const stored = await t.services.db.query<{ url: string; active: boolean }>(`SELECT w.url, w.enabled AS active FROM indexer_listeners l JOIN webhooks w ON w.id = l.webhook_id`);
    expect(stored.rows).toEqual([{ url: hook.url, active: true }]);
    // The publishable key still reads the chain through the same client.
    expect((await asKey.getChainID()).chainID).toBe(chain.anvil.chainId);
    expect((await sec.removeAllWebhookListeners({})).status).toBe(true);
    expect((await sec.getAllWebhookListeners({})).listeners).toEqual([]);
  });

  it('a secret key sent from a browser (an Origin header) is refused, for writes and reads; without one it works', async () => {
    const h = { authorization: `Bearer ${t.secretKey}`, origin: APP };
    const write = await rpc(t.app, '/rpc/Collections/CreateCollection', { collection: { metadata: { name: 'From a browser' } } }, h);
    expect(write).toMatchObject({ status: 403, body: { error: 'SecretKeyCorsDisallowed', code: 1009 } });
    expect(await count('collections')).toBe(0);
    const read = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: ['1'] }, { 'x-access-key': t.secretKey, origin: APP });
    expect(read).toMatchObject({ status: 403, body: { code: 1009 } });
    const indexer = await rpc(t.app, '/indexer/anvil/rpc/Indexer/GetChainID', {}, { 'x-access-key': t.secretKey, origin: APP });
    expect(indexer).toMatchObject({ status: 403, body: { code: 1009 } });
    const stream = await fetch(`${base}/events?accessKey=${t.secretKey}`, { headers: { origin: APP } });
    expect(stream.status).toBe(403);
    expect(await stream.json()).toMatchObject({ code: 1009 });
    // From a backend: the same key reads and writes.
    const ok = await new SequenceMetadata(base, t.secretKey).getTokenMetadata({ chainID: 'anvil', contractAddress: nft, tokenIDs: ['1'] });
    expect(ok.tokenMetadata[0]?.name).toBe('Token 1');
  });

  it('a publishable key held to origins answers its own origin and no Origin, and refuses any other (InvalidOrigin 1103), cached answers included', async () => {
    const body = { chainID: 'anvil', contractAddress: nft, tokenIDs: ['1'] };
    const mine = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', body, { 'x-access-key': webKey, origin: APP });
    expect(mine.status).toBe(200);
    expect(mine.body.tokenMetadata[0].name).toBe('Token 1');
    // The same call again would be answered from the response cache: the origin is still checked.
    const theirs = await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', body, { 'x-access-key': webKey, origin: EVIL });
    expect(theirs).toMatchObject({ status: 403, body: { error: 'InvalidOrigin', code: 1103 } });
    // Through the socket, where cached answers are given before routing (http/core/early-answers.ts).
    const early = await fetch(`${base}/rpc/Metadata/GetTokenMetadata`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-access-key': webKey, origin: EVIL },
      body: JSON.stringify(body),
    });
    expect(early.status).toBe(403);
    expect(await early.json()).toMatchObject({ code: 1103 });
    const rest = `/tokens/anvil/${nft}/1`;
    expect((await getRest(t, rest, { 'x-access-key': webKey, origin: APP })).status).toBe(200);
    const restEarly = await fetch(`${base}${rest}?accessKey=${webKey}`, { headers: { origin: EVIL } });
    expect(restEarly.status).toBe(403);
    expect((await getRest(t, rest, { 'x-access-key': webKey, origin: 'https://app.example.evil.example' })).status).toBe(403);
    const ix = await rpc(t.app, '/indexer/anvil/rpc/Indexer/GetChainID', {}, { 'x-access-key': webKey, origin: EVIL });
    expect(ix).toMatchObject({ status: 403, body: { error: 'InvalidOrigin', code: 1103 } });
    const stream = await fetch(`${base}/events?accessKey=${webKey}`, { headers: { origin: EVIL } });
    expect(stream.status).toBe(403);
    expect(await stream.json()).toMatchObject({ code: 1103 });
    // No Origin: a server, which origins cannot hold (the key's rate limit and networks still do).
    expect((await rpc(t.app, '/rpc/Metadata/GetTokenMetadata', body, { 'x-access-key': webKey })).status).toBe(200);
    expect((await rpc(t.app, '/indexer/anvil/rpc/Indexer/GetChainID', {}, { 'x-access-key': webKey, origin: APP })).status).toBe(200);
  });
});

describe('hosted documents are sanitised as GetTokenMetadata answers are', () => {
  it('refuses links that are not http(s) or ipfs:// and image_data that is no SVG, stores SVG sanitised, and serves a row stored before the rules safely', async () => {
    const sec = new SequenceCollections(base, t.secretKey);
    const { collection } = await sec.createCollection({ collection: { metadata: { name: 'Clean' }, private: false } as never });
    const id = collection.id;
    const bad: Array<[string, Record<string, unknown>]> = [
      ['external_url', { external_url: 'javascript:alert(2)' }],
      ['animation_url', { animation_url: 'data:text/html,<script>alert(1)</script>' }],
      ['image', { image: ' JaVaScRiPt:alert(1)' }],
      ['image_data', { image_data: '<script>alert(1)</script>' }],
    ];
    for (const [field, doc] of bad) {
      const e = await errorOf(sec.createToken({ collectionId: id, token: { tokenId: '1', name: 'x', ...doc } as never }));
      expect(e, field).toMatchObject({ code: 2001 });
      expect(e.cause, field).toContain(field);
    }
    expect(await errorOf(sec.createCollection({ collection: { metadata: { name: 'x', external_link: 'javascript:alert(1)' } } as never }))).toMatchObject({ code: 2001 });
    expect(await count('collection_tokens')).toBe(0);

    const svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" width="4" height="4"><script>alert(2)</script><rect width="4" height="4" fill="red"/></svg>';
    await sec.createToken({ collectionId: id, token: { tokenId: '1', name: 'One', image_data: svg, external_url: 'https://ok.example/1', image: 'ipfs://bafkqaaa' } as never });
    const row = await t.services.db.query<{ image_data: string }>(`SELECT metadata->>'image_data' AS image_data FROM collection_tokens WHERE collection_id = $1`, [id]);
    expect(row.rows[0]!.image_data).toContain('<rect');
    expect(row.rows[0]!.image_data).not.toMatch(/script|onload/i);
    expect((await sec.updateToken({ collectionId: id, tokenId: '1', token: { tokenId: '1', external_url: 'javascript:alert(3)' } as never }).catch((e) => e)).code).toBe(2001);

    // A row written before the rules (or by hand): served without the bad link and with its SVG sanitised.
    await t.services.db.query(`INSERT INTO collection_tokens (collection_id, token_id, metadata) VALUES ($1, '2', $2)`, [
      id,
      JSON.stringify({ name: 'Two', external_url: 'javascript:alert(2)', animation_url: 'data:text/html,<script>alert(1)</script>', image_data: svg, image: 'https://ok.example/2.png' }),
    ]);
    const served = (await (await fetch(`${base}/projects/${t.project.id}/collections/${id}/tokens/2`)).json()) as Record<string, string>;
    expect(served).not.toHaveProperty('external_url');
    expect(served).not.toHaveProperty('animation_url');
    expect(served.image).toBe('https://ok.example/2.png');
    expect(served.image_data).toContain('<rect');
    expect(served.image_data).not.toMatch(/script|onload/i);
    const one = (await (await fetch(`${base}/projects/${t.project.id}/collections/${id}/tokens/1`)).json()) as Record<string, string>;
    expect(one).toMatchObject({ name: 'One', external_url: 'https://ok.example/1', image: 'ipfs://bafkqaaa' });
    await sec.deleteCollection({ collectionId: id });
  });
});

describe('contract links need proof, and a project has quotas', () => {
  it('a contract the project does not control is refused; one that points at the collection, or whose owner() signed the link, is linked', async () => {
    const sec = new SequenceCollections(base, t.secretKey);
    const { collection } = await sec.createCollection({ collection: { metadata: { name: 'Linked' } } as never });
    const uris = collection.baseURIs!;
    const chainId = chain.anvil.chainId;
    const challenge = `metarelay: link contract ${nft} on chain ${chainId} to collection ${collection.id} of project ${t.project.id}`;
    const link = (contractAddress: string, ownerSignature?: string) =>
      rpc(
        t.app,
        '/rpc/Collections/CreateContractCollection',
        { contractCollection: { chainId, contractAddress, collectionId: collection.id }, ...(ownerSignature ? { ownerSignature } : {}) },
        {
          authorization: `Bearer ${t.secretKey}`,
        },
      );
    // The dev ERC-721 points elsewhere; an address without code has nothing to prove with.
    const foreign = await link(nft);
    expect(foreign.body).toMatchObject({ error: 'PermissionDenied', code: 1001 });
    expect(foreign.body.cause).toContain(challenge);
    expect((await link(`0x${'ab'.repeat(20)}`)).body).toMatchObject({ error: 'PermissionDenied' });
    const stranger = await privateKeyToAccount(generatePrivateKey()).signMessage({ message: challenge });
    expect((await link(nft, stranger)).body).toMatchObject({ error: 'PermissionDenied' });
    expect((await link(nft, '0xnot-hex')).body).toMatchObject({ error: 'PermissionDenied' });
    expect(await count('contract_collections')).toBe(0);

    // Signed by its owner() (the deployer): linked.
    const signed = await privateKeyToAccount(ANVIL_DEPLOYER_KEY).signMessage({ message: challenge });
    expect((await link(nft, signed)).status).toBe(200);
    // Pointing at the collection (contractURI): linked with no signature.
    const [pointing] = await chain.deploy([{ contract: 'DevERC721', args: ['Points', 'PTS', uris.tokenMetadataURI, uris.contractMetadataURI] }]);
    expect((await sec.createContractCollection({ contractCollection: { chainId, contractAddress: pointing!.toLowerCase(), collectionId: collection.id } } as never)).contractCollection).toMatchObject({
      collectionId: collection.id,
    });
    const rows = await t.services.db.query<{ a: string }>('SELECT contract_address AS a FROM contract_collections WHERE project_id = $1 ORDER BY id', [t.project.id]);
    expect(rows.rows.map((r) => r.a)).toEqual([nft, pointing!.toLowerCase()]);

    // Two links is this project's quota: a third, proven, is refused as over quota.
    const [third] = await chain.deploy([{ contract: 'DevERC721', args: ['Third', 'THD', uris.tokenMetadataURI, uris.contractMetadataURI] }]);
    expect((await link(third!.toLowerCase())).body).toMatchObject({ error: 'QuotaExceeded', code: 1200, status: 429 });

    // Edits of a collection linked to several contracts queue their refreshes in the background, one
    // contract-info task for all of them per batch (before: one task per contract per edit, in the request).
    // The links' own refreshes are queued in the background too: wait for both before the edits.
    const linkedInfo = async () =>
      (
        await t.services.db.query<{ item: string }>(`SELECT DISTINCT i.item FROM tasks k JOIN task_items i ON i.task_id = k.id WHERE k.kind = 'contracts' AND k.project_id = $1`, [t.project.id])
      ).rows.map((r) => r.item);
    await eventually(linkedInfo, (items) => expect(items.sort()).toEqual([nft, pointing!.toLowerCase()].sort()));
    const last = Number((await t.services.db.query<{ n: string }>('SELECT COALESCE(max(id), 0)::text AS n FROM tasks')).rows[0]!.n);
    for (const name of ['Linked 2', 'Linked 3', 'Linked 4']) await sec.updateCollection({ collection: { id: collection.id, metadata: { name } } as never });
    const infoTasks = async () =>
      (
        await t.services.db.query<{ items: string[] }>(
          `SELECT array_agg(i.item ORDER BY i.item) AS items FROM tasks k JOIN task_items i ON i.task_id = k.id WHERE k.kind = 'contracts' AND k.project_id = $1 AND k.id > $2 GROUP BY k.id`,
          [t.project.id, last],
        )
      ).rows.map((r) => r.items);
    const both = [nft, pointing!.toLowerCase()].sort();
    const seen = await eventually(infoTasks, (x) => expect(x.length).toBeGreaterThan(0));
    expect(seen.length).toBeLessThanOrEqual(3);
    for (const items of seen) expect(items).toEqual(both);
    await sec.deleteCollection({ collectionId: collection.id });
    expect(await count('contract_collections')).toBe(0);
  });

  it('refuses collections, tokens, assets and uploaded bytes past the quota with QuotaExceeded, and stores none of them', async () => {
    const sec = new SequenceCollections(base, t.secretKey);
    const made = [];
    for (let i = 0; i < 3; i++) made.push((await sec.createCollection({ collection: { metadata: { name: `Q${i}` } } as never })).collection.id);
    const over = await errorOf(sec.createCollection({ collection: { metadata: { name: 'Q3' } } as never }));
    expect(over).toMatchObject({ code: 1200, status: 429 });
    expect(over.cause).toContain('collections.quotas.collections');
    expect(await count('collections')).toBe(3);

    const id = made[0]!;
    for (let i = 1; i <= 4; i++) await sec.createToken({ collectionId: id, token: { tokenId: String(i), name: `T${i}` } as never });
    expect(await errorOf(sec.createToken({ collectionId: id, token: { tokenId: '5', name: 'T5' } as never }))).toMatchObject({ code: 1200 });
    expect(await count('collection_tokens')).toBe(4);

    const assets = [];
    for (let i = 1; i <= 3; i++) assets.push((await sec.createAsset({ asset: { collectionId: id, tokenId: String(i), metadataField: 'image' } as never })).asset.id);
    expect(await errorOf(sec.createAsset({ asset: { collectionId: id, tokenId: '4', metadataField: 'image' } as never }))).toMatchObject({ code: 1200 });
    expect(await count('collection_assets')).toBe(3);

    // 20 000 bytes of uploads: a small file fits, a large one does not, and is not stored.
    expect((await uploadFile(base, `/projects/${t.project.id}/collections/${id}/tokens/1/upload/${assets[0]}`, await solidPng(8, 8), 'a.png', t.secretKey)).status).toBe(200);
    const big = await noisyPng(120, 120);
    expect(big.length).toBeGreaterThan(20_000);
    const refused = await uploadFile(base, `/projects/${t.project.id}/collections/${id}/tokens/2/upload/${assets[1]}`, big, 'b.png', t.secretKey);
    expect(refused).toMatchObject({ status: 429, body: { error: 'QuotaExceeded' } });
    expect((await t.services.db.query('SELECT 1 FROM collection_assets WHERE id = $1 AND sha256 IS NOT NULL', [assets[1]])).rows).toEqual([]);
    for (const c of made) await sec.deleteCollection({ collectionId: c });
  });

  it('holds uploads to the project upload rate: past the burst, RateLimited with Retry-After', async () => {
    const sec = new SequenceCollections(base, t.secretKey);
    const { collection } = await sec.createCollection({ collection: { metadata: { name: 'Rate' } } as never });
    await sec.createToken({ collectionId: collection.id, token: { tokenId: '1', name: 'One' } as never });
    const { asset } = await sec.createAsset({ asset: { collectionId: collection.id, tokenId: '1', metadataField: 'image' } as never });
    const path = `/projects/${t.project.id}/collections/${collection.id}/tokens/1/upload/${asset.id}`;
    // A burst of 4 at one a minute (earlier tests in this file took some): a refusal comes within 5.
    let refused: Awaited<ReturnType<typeof uploadFile>> | undefined;
    let res: Response | undefined;
    for (let i = 0; i < 5 && !refused; i++) {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(await solidPng(4, 4, `#0000${(16 + i).toString(16)}`))]), 'r.png');
      res = await fetch(`${base}${path}`, { method: 'PUT', headers: { authorization: `Bearer ${t.secretKey}` }, body: form });
      if (res.status !== 200) refused = { status: res.status, body: (await res.json()) as never };
    }
    expect(refused).toMatchObject({ status: 429, body: { error: 'RateLimited', code: 2005 } });
    expect(Number(res!.headers.get('retry-after'))).toBeGreaterThan(0);
    await sec.deleteCollection({ collectionId: collection.id });
  });
});
