// Collections end to end, through the official @0xsequence/metadata clients (SequenceCollections,
// SequenceMetadata) and @0xsequence/indexer against a listening service on a real anvil: a project
// hosts a collection, uploads an image, publishes, points a freshly deployed ERC-721's base URI at it,
// and the token reads back through GetTokenMetadata, REST and the indexer. Run on the folder blob
// store and on a local S3 server (s3rver). Hostile uploads and other projects are refused.

import { createHash } from 'node:crypto';
import { SequenceIndexer } from '@0xsequence/indexer';
import { SequenceCollections, SequenceMetadata } from '@0xsequence/metadata';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { originalKey } from '../src/media/blob-store.ts';
import { errorOf, uploadFile } from './support/collections.ts';
import { bombPng, noisyPng, s3Backend, solidPng, type BlobBackend } from './support/media.ts';
import { rpc, startTestService, type TestService } from './support/service.ts';
import { eventually, explain, getRest, startTokenChain, type TokenChain } from './support/token-chain.ts';

const ADMIN = 'collections-admin-token-0123456789';
const DEPLOYER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const MAX_BYTES = 400_000;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let chain: TokenChain;
beforeAll(async () => {
  chain = await startTokenChain();
}, 120_000);
afterAll(async () => {
  await chain?.stop();
});

for (const storeKind of ['folder', 's3'] as const) {
  describe(`collections on the ${storeKind} blob store`, () => {
    let t: TestService;
    let s3: BlobBackend | undefined;
    let base: string;
    let collections: SequenceCollections;
    let projectId: number;
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };

    beforeAll(async () => {
      let store: { type: 's3'; bucket: string; endpoint: string; forcePathStyle: boolean; region: string; prefix: string } | undefined;
      if (storeKind === 's3') {
        s3 = await s3Backend();
        // The service's S3 client takes its credentials from the environment, as in production.
        process.env.AWS_ACCESS_KEY_ID = 'S3RVER';
        process.env.AWS_SECRET_ACCESS_KEY = 'S3RVER';
        store = { type: 's3', bucket: 'metarelay-media', endpoint: s3.endpoint!, forcePathStyle: true, region: 'us-east-1', prefix: 'm/' };
      }
      t = await startTestService({
        // Our own address is private: a document or image fetched over HTTP from ourselves would be
        // refused, so every read below proves the local path.
        allowPrivateNetworks: false,
        admin: { tokens: [ADMIN] },
        chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
        metadata: { inlineWaitMs: 30_000, hotCacheTtlMs: 0 },
        media: { maxBytes: MAX_BYTES, ...(store ? { store } : {}) },
        refresh: { coolOffSec: 3600 },
      });
      base = await t.app.listen({ port: 0, host: '127.0.0.1' });
      t.services.startBackground();
      // Writes take the project's secret key, as Sequence's builder API takes its secret credential.
      collections = new SequenceCollections(base, t.secretKey);
      projectId = t.project.id;
    }, 120_000);

    afterAll(async () => {
      await t?.close();
      await s3?.stop();
      process.env.AWS_ACCESS_KEY_ID = saved.id;
      process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
      if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
      if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
    });

    const blobs = () => t.services.media!.blobs;
    const upload = (path: string, bytes: Buffer, name = 'file.png', key = t.secretKey) => uploadFile(base, path, bytes, name, key);
    /** A collection with one token and a declared image asset. */
    const scaffold = async (name: string, tokenId = '1') => {
      const { collection } = await collections.createCollection({ collection: { metadata: { name, description: `${name} collection` } } as never });
      await collections.createToken({ collectionId: collection.id, token: { tokenId, name: `${name} #${tokenId}`, attributes: [{ trait_type: 'Color', value: 'Red' }] } as never });
      const { asset } = await collections.createAsset({ asset: { collectionId: collection.id, tokenId, metadataField: 'image' } as never });
      return { collection, asset, uploadPath: `/projects/${projectId}/collections/${collection.id}/tokens/${tokenId}/upload/${asset.id}` };
    };

    it('hosts a published collection where an ERC-721 points, read through GetTokenMetadata, REST and the indexer; unpublishing hides it and edits refresh it', async () => {
      const { collection, uploadPath } = await scaffold('Gems');
      expect(collection).toMatchObject({ projectId, private: true, metadata: { name: 'Gems' } });
      const uris = collection.baseURIs!;
      expect(uris.tokenMetadataURI).toBe(`${base}/projects/${projectId}/collections/${collection.id}/tokens/`);

      const png = await solidPng(600, 400);
      const up = await upload(uploadPath, png, 'gem.png');
      expect(up.status).toBe(200);
      expect(up.body.asset).toMatchObject({ url: `${base}/media/b/${sha(png)}/original`, mimeType: 'image/png', width: 600, height: 400, filesize: png.length, name: 'gem.png' });
      expect(await blobs().get(originalKey(sha(png)))).toEqual(png);

      // Unpublished: nothing is served.
      expect((await fetch(`${uris.tokenMetadataURI}1`)).status).toBe(404);
      await collections.publishCollection({ collectionId: collection.id });
      const doc = await fetch(`${uris.tokenMetadataURI}1.json`);
      expect(doc.status).toBe(200);
      expect(doc.headers.get('cache-control')).toBe('public, max-age=60');
      expect(await doc.json()).toEqual({ name: 'Gems #1', attributes: [{ trait_type: 'Color', value: 'Red' }], image: `${base}/media/b/${sha(png)}/original` });
      expect(await (await fetch(uris.contractMetadataURI)).json()).toEqual({ name: 'Gems', description: 'Gems collection' });

      const [nft] = await chain.deploy([{ contract: 'DevERC721', args: ['Gems', 'GEM', uris.tokenMetadataURI, uris.contractMetadataURI] }]);
      const contract = nft!.toLowerCase() as Address;
      await chain.send([{ address: contract, contract: 'DevERC721', functionName: 'mint', args: [DEPLOYER, 1n] }]);
      const { contractCollection } = await collections.createContractCollection({
        projectId,
        contractCollection: { chainId: chain.anvil.chainId, contractAddress: contract, collectionId: collection.id } as never,
      });
      expect(contractCollection).toMatchObject({ chainId: chain.anvil.chainId, contractAddress: contract, collectionId: collection.id });

      const metadata = new SequenceMetadata(base, t.accessKey);
      const [token] = (await metadata.getTokenMetadata({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] })).tokenMetadata;
      expect(token).toMatchObject({ tokenId: '1', name: 'Gems #1', image: `${base}/media/b/${sha(png)}/original`, attributes: [{ trait_type: 'Color', value: 'Red' }], status: 'AVAILABLE' });
      expect((await explain(t, contract, 1)).trace.attempts).toEqual([expect.objectContaining({ url: `${uris.tokenMetadataURI}1`, status: 200 })]);
      const rest = await getRest(t, `/tokens/anvil/${contract}/1`, { 'x-access-key': t.accessKey });
      expect(rest.body[0]).toMatchObject({ name: 'Gems #1', image: `${base}/media/b/${sha(png)}/original` });
      // The media pipeline takes the image from our own blob store (a fetch of our private address would fail).
      await t.services.media!.idle();
      const again = await eventually(
        () => metadata.getTokenMetadata({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] }),
        (r) => expect(r.tokenMetadata[0].assets?.length).toBe(1),
        30_000,
      );
      expect(again.tokenMetadata[0].assets![0]).toMatchObject({ metadataField: 'image', mimeType: 'image/png', width: 600 });

      // The contractURI is the collection's own document, read locally as well.
      await eventually(
        async () => (await metadata.getContractInfo({ chainID: 'anvil', contractAddress: contract })).contractInfo,
        (c) => expect(c.extensions?.description).toBe('Gems collection'),
        30_000,
      );

      const indexer = new SequenceIndexer(`${base}/indexer/anvil`, t.accessKey);
      const balances = await eventually(
        async () => (await indexer.getTokenBalances({ accountAddress: DEPLOYER, contractAddress: contract, includeMetadata: true })).balances,
        (b) => expect(b[0]?.tokenMetadata?.name).toBe('Gems #1'),
        30_000,
      );
      expect(balances[0]!.tokenMetadata).toMatchObject({ image: `${base}/media/b/${sha(png)}/original` });

      // An edit refreshes the linked contract's cached metadata (no wait for a cool-off).
      await collections.updateToken({ collectionId: collection.id, tokenId: '1', token: { tokenId: '1', name: 'Gems #1 (cut)', attributes: [] } as never });
      await eventually(
        () => metadata.getTokenMetadata({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] }),
        (r) => expect(r.tokenMetadata[0].name).toBe('Gems #1 (cut)'),
        30_000,
      );

      // Unpublished: the URLs answer 404, and the refresh records that the document is gone.
      await collections.unpublishCollection({ collectionId: collection.id });
      expect((await fetch(`${uris.tokenMetadataURI}1`)).status).toBe(404);
      expect((await fetch(uris.contractMetadataURI)).status).toBe(404);
      await eventually(
        () => explain(t, contract, 1),
        (e) => expect(e.failureReason).toBe('HTTP_404'),
        30_000,
      );
      // Hidden where clients read it too: the withdrawn document is not kept as a last good one.
      const [hidden] = (await metadata.getTokenMetadata({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] })).tokenMetadata;
      expect(hidden).toMatchObject({ tokenId: '1', name: '', image: '', status: 'NOT_AVAILABLE', failureReason: 'HTTP_404' });
      expect(hidden!.assets).toBeUndefined();
      const restHidden = await getRest(t, `/tokens/anvil/${contract}/1`, { 'x-access-key': t.accessKey });
      expect(restHidden.text).not.toContain('Gems #1');
      expect(restHidden.body[0]).toMatchObject({ name: '', status: 'NOT_AVAILABLE' });
      const [held] = (await indexer.getTokenBalances({ accountAddress: DEPLOYER, contractAddress: contract, includeMetadata: true })).balances;
      expect(held!.tokenMetadata).toMatchObject({ name: '', status: 'NOT_AVAILABLE' });
      const info = await eventually(
        async () => (await metadata.getContractInfo({ chainID: 'anvil', contractAddress: contract })).contractInfo,
        (c) => expect(c.extensions?.description).toBeUndefined(),
        30_000,
      );
      expect(info.name).toBe('Gems');

      // Published again: it comes back.
      await collections.publishCollection({ collectionId: collection.id });
      await eventually(
        () => metadata.getTokenMetadata({ chainID: 'anvil', contractAddress: contract, tokenIDs: ['1'] }),
        (r) => expect(r.tokenMetadata[0]).toMatchObject({ name: 'Gems #1 (cut)', status: 'AVAILABLE' }),
        30_000,
      );
    });

    it('keeps a project to its own collections; the admin token acts for any project it names', async () => {
      const mine = await scaffold('Mine');
      const [deployed] = await chain.deploy([{ contract: 'DevERC721', args: ['Mine', 'MINE', mine.collection.baseURIs!.tokenMetadataURI, mine.collection.baseURIs!.contractMetadataURI] }]);
      const mineContract = deployed!.toLowerCase() as Address;
      const chainId = chain.anvil.chainId;
      await collections.createContractCollection({ contractCollection: { chainId, contractAddress: mineContract, collectionId: mine.collection.id } } as never);
      const other = await t.services.projects.create(`other-${storeKind}-${Date.now()}`);
      const { key } = await t.services.accessKeys.create(other.id, 'other', { kind: 'secret' });
      const theirs = new SequenceCollections(base, key);
      const { collection: theirOwn } = await theirs.createCollection({ collection: { metadata: { name: 'Theirs' } } as never });

      // Every one of the 21 methods that names another project's collection, token, asset or link.
      for (const call of [
        () => theirs.getCollection({ collectionId: mine.collection.id }),
        () => theirs.updateCollection({ collection: { id: mine.collection.id, metadata: { name: 'stolen' } } as never }),
        () => theirs.deleteCollection({ collectionId: mine.collection.id }),
        () => theirs.publishCollection({ collectionId: mine.collection.id }),
        () => theirs.unpublishCollection({ collectionId: mine.collection.id }),
        () => theirs.createToken({ collectionId: mine.collection.id, token: { tokenId: '9', name: 'x' } as never }),
        () => theirs.getToken({ collectionId: mine.collection.id, tokenId: '1' }),
        () => theirs.listTokens({ collectionId: mine.collection.id }),
        () => theirs.updateToken({ collectionId: mine.collection.id, tokenId: '1', token: { tokenId: '1', name: 'stolen' } as never }),
        () => theirs.deleteToken({ collectionId: mine.collection.id, tokenId: '1' }),
        () => theirs.createAsset({ asset: { collectionId: mine.collection.id, tokenId: '1', metadataField: 'animation_url' } as never }),
        () => theirs.getAsset({ assetId: mine.asset.id }),
        () => theirs.updateAsset({ asset: { id: mine.asset.id, collectionId: mine.collection.id, metadataField: 'image' } as never }),
        () => theirs.deleteAsset({ assetId: mine.asset.id }),
        () => theirs.createContractCollection({ contractCollection: { chainId, contractAddress: mineContract, collectionId: mine.collection.id } } as never),
        () => theirs.getContractCollection({ chainId, contractAddress: mineContract } as never),
        () => theirs.listContractCollections({ collectionId: mine.collection.id } as never),
        () => theirs.updateContractCollection({ contractCollection: { chainId, contractAddress: mineContract, collectionId: theirOwn.id } } as never),
        () => theirs.deleteContractCollection({ chainId, contractAddress: mineContract } as never),
      ]) {
        expect(await errorOf(call())).toMatchObject({ code: 3000 });
      }
      expect((await theirs.listCollections({})).collections.map((c) => c.id)).toEqual([theirOwn.id]);
      expect((await theirs.listContractCollections({} as never)).contractCollections).toEqual([]);
      // A contract already linked by one project cannot be taken over by another.
      expect(await errorOf(theirs.createContractCollection({ contractCollection: { chainId, contractAddress: mineContract, collectionId: theirOwn.id } } as never))).toMatchObject({
        code: 1004,
      });
      expect(await errorOf(theirs.listCollections({ projectId }))).toMatchObject({ code: 1001 });
      const stolen = await upload(mine.uploadPath.replace(`/projects/${projectId}/`, `/projects/${other.id}/`), await solidPng(10, 10), 'x.png', key);
      expect(stolen.status).toBe(400);
      expect(stolen.body.error).toBe('NotFound');
      // Still intact for its owner.
      expect((await collections.getCollection({ collectionId: mine.collection.id })).collection).toMatchObject({ metadata: { name: 'Mine' }, private: true });
      expect((await collections.getToken({ collectionId: mine.collection.id, tokenId: '1' })).token.name).toBe('Mine #1');
      expect((await collections.getAsset({ assetId: mine.asset.id })).asset.metadataField).toBe('image');
      expect((await collections.getContractCollection({ chainId, contractAddress: mineContract } as never)).contractCollection.collectionId).toBe(mine.collection.id);

      // No credential, a wrong one.
      expect(await errorOf(new SequenceCollections(base).getCollection({ collectionId: mine.collection.id }))).toMatchObject({ code: 1000 });
      expect(await errorOf(new SequenceCollections(base, 'mr_not_a_key').getCollection({ collectionId: mine.collection.id }))).toMatchObject({ code: 1000 });
      // The operator names the project; without one it is asked for.
      const admin = new SequenceCollections(base, ADMIN);
      expect((await admin.getCollection({ projectId, collectionId: mine.collection.id })).collection.id).toBe(mine.collection.id);
      expect(await errorOf(admin.getCollection({ projectId: other.id, collectionId: mine.collection.id }))).toMatchObject({ code: 3000 });
      expect(await errorOf(admin.createCollection({ collection: { metadata: { name: 'x' } } as never }))).toMatchObject({ code: 2001 });
      const made = await admin.createCollection({ projectId: other.id, collection: { metadata: { name: 'For other' } } as never });
      expect(made.collection.projectId).toBe(other.id);
      expect((await theirs.listCollections({})).collections.map((c) => c.id)).toEqual([theirOwn.id, made.collection.id]);
    });

    it('refuses hostile uploads with a clear reason and stores nothing of them', async () => {
      const { uploadPath } = await scaffold('Hostile');
      const before = await blobs().list('o/');
      const html = await upload(uploadPath, Buffer.from('<html><script>alert(1)</script></html>'), 'evil.png');
      expect(html).toMatchObject({ status: 400, body: { error: 'InvalidArgument' } });
      expect(html.body.cause).toMatch(/^UNSUPPORTED_TYPE/);
      const bomb = await upload(uploadPath, await bombPng(60_000, 60_000), 'bomb.png');
      expect(bomb.body.cause).toMatch(/^TOO_MANY_PIXELS/);
      const svg = await upload(uploadPath, Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script></svg>'), 'x.svg');
      expect(svg.body.cause).toMatch(/^SVG_SCRIPT/);
      const handler = await upload(uploadPath, Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" width="10" height="10"/>'), 'x.svg');
      expect(handler.body.cause).toMatch(/^SVG_SCRIPT/);
      const big = await upload(uploadPath, await noisyPng(600, 600), 'big.png');
      expect(big.status).toBe(413);
      expect(big.body.cause).toMatch(/^TOO_LARGE/);
      const raw = await fetch(`${base}${uploadPath}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${t.secretKey}`, 'content-type': 'application/octet-stream' },
        body: new Uint8Array(MAX_BYTES + 70_000),
      });
      expect(raw.status).toBe(413);
      const empty = await upload(uploadPath, Buffer.alloc(0), 'empty.png');
      expect(empty.body.cause).toMatch(/^EMPTY/);
      expect(await blobs().list('o/')).toEqual(before);
      // Bad arguments are named, not a 500.
      expect(await errorOf(collections.createToken({ collectionId: 1, token: { tokenId: 'not-a-number', name: 'x' } as never }))).toMatchObject({ code: 2001 });
      expect(await errorOf(collections.createAsset({ asset: { collectionId: 1, metadataField: '../../etc' } as never }))).toMatchObject({ code: 2001 });
      expect((await rpc(t.app, '/rpc/Collections/CreateCollection', { collection: { metadata: { name: '' } } }, { 'x-access-key': t.secretKey })).body).toMatchObject({ code: 2001 });
    });

    it('collects blobs nothing references once their assets, tokens or collections go', async () => {
      const a = await scaffold('GC-a');
      const b = await scaffold('GC-b');
      const shared = await solidPng(50, 50, '#abcdef');
      expect((await upload(a.uploadPath, shared)).status).toBe(200);
      expect((await upload(b.uploadPath, shared)).status).toBe(200);
      const key = originalKey(sha(shared));
      // Replacing a's bytes releases nothing while b still holds the same file.
      const other = await solidPng(50, 50, '#123456');
      expect((await upload(a.uploadPath, other)).status).toBe(200);
      expect(await blobs().get(key)).toEqual(shared);
      await collections.deleteAsset({ assetId: b.asset.id });
      expect(await blobs().get(key)).toBeUndefined();
      await collections.deleteToken({ collectionId: a.collection.id, tokenId: '1' });
      expect(await blobs().get(originalKey(sha(other)))).toBeUndefined();
      const c = await scaffold('GC-c');
      const third = await solidPng(30, 30, '#00aa00');
      await upload(c.uploadPath, third);
      await collections.deleteCollection({ collectionId: c.collection.id });
      expect(await blobs().get(originalKey(sha(third)))).toBeUndefined();
      expect(await errorOf(collections.getCollection({ collectionId: c.collection.id }))).toMatchObject({ code: 3000 });
    });
  });
}
