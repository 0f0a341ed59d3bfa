// The console's Collections tab through its admin API: a project's collections (published or not,
// token counts, linked contracts) and a collection's tokens with the pictures uploaded to it, paged
// by cursor, against a real service on anvil and a real database; the project's collections only,
// and bad input refused with a clear error.
import { SequenceCollections } from '@0xsequence/metadata';
import type { Address } from 'viem';
import { describe, expect, it } from 'vitest';
import { hostCollection } from '../support/collections.ts';
import { solidPng } from '../support/media.ts';
import type { RelayerEnv } from '../support/relayer-env.ts';
import { rpc } from '../support/service.ts';
import { bearer, type Call } from './support.ts';
import { consoleRelayerEnv } from '../support/console-env.ts';

let env: RelayerEnv;
let call: Call;
const admin = (method: string, body: unknown = {}) => call(method, body, bearer(env.adminToken));

consoleRelayerEnv((e, c) => {
  env = e;
  call = c;
});

/** A fresh project and its secret key (collections are written with one), made as the console makes them. */
async function project() {
  const p = (await admin('CreateProject', { name: `coll-${Math.random().toString(36).slice(2, 8)}` })).body.project.id as number;
  const key = (await admin('CreateAccessKey', { projectId: p, label: 'collections', kind: 'secret' })).body.accessKey as string;
  return { id: p, key };
}

describe('console: collections', () => {
  it("lists a project's collections newest first with state, token count and linked contracts, and a collection's tokens in id order with their pictures, a page at a time", async () => {
    const p = await project();
    const gems = await hostCollection(env.baseUrl, p.key, p.id, 'Gems', [
      { tokenId: '1', name: 'Ruby', picture: { bytes: await solidPng(300, 200, '#c0392b'), filename: 'ruby.png' } },
      {
        tokenId: '2',
        name: 'Emerald',
        picture: { bytes: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="40" height="40"><rect width="40" height="40" fill="#27ae60"/></svg>'), filename: 'emerald.svg' },
      },
      { tokenId: '10', name: 'Sapphire', image: 'https://example.com/sapphire.png' },
      { tokenId: '9', name: 'Topaz' },
      { tokenId: '100', name: 'Opal' },
    ]);
    const drafts = await hostCollection(env.baseUrl, p.key, p.id, 'Drafts', [], false);
    const third = await hostCollection(env.baseUrl, p.key, p.id, 'Third', []);
    const [nft] = await env.chain.deploy([{ contract: 'DevERC721', args: ['Gems', 'GEM', gems.collection.baseURIs!.tokenMetadataURI, gems.collection.baseURIs!.contractMetadataURI] }]);
    const contract = nft!.toLowerCase() as Address;
    await gems.client.createContractCollection({ contractCollection: { chainId: env.chainId, contractAddress: contract, collectionId: gems.collection.id } } as never);

    const first = await admin('ListProjectCollections', { projectId: p.id, pageSize: 2 });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.total).toBe(3);
    // What the project holds against its quotas (the defaults): 3 collections, 5 tokens, 2 uploaded pictures, 1 link.
    expect(first.body.usage).toMatchObject({
      used: { collections: 3, tokens: 5, assets: 2, links: 1 },
      quotas: { collections: 100, tokens: 100_000, assets: 100_000, links: 100, bytes: 1_073_741_824 },
    });
    expect(first.body.usage.used.bytes).toBeGreaterThan(0);
    expect(first.body.collections.map((c: { name: string }) => c.name)).toEqual(['Third', 'Drafts']);
    expect(first.body.collections[1]).toMatchObject({ id: drafts.collection.id, published: false, tokenCount: 0, contracts: [] });
    const second = await admin('ListProjectCollections', { projectId: p.id, pageSize: 2, cursor: first.body.nextCursor });
    expect(second.body.nextCursor).toBeNull();
    expect(second.body.collections).toEqual([
      expect.objectContaining({
        id: gems.collection.id,
        name: 'Gems',
        description: 'Gems, hosted here',
        published: true,
        tokenCount: 5,
        tokenMetadataURI: gems.collection.baseURIs!.tokenMetadataURI,
        contracts: [{ chainId: env.chainId, network: env.chain.chainConfig.name, contractAddress: contract }],
      }),
    ]);
    expect(third.collection.id).toBeGreaterThan(drafts.collection.id);

    // Tokens in numeric id order ("9" before "10"), two to a page, each with its uploaded picture.
    const ids: string[] = [];
    const tokens: any[] = [];
    let cursor: string | undefined;
    for (let pages = 0; pages < 5; pages++) {
      const r = await admin('ListCollectionTokens', { projectId: p.id, collectionId: gems.collection.id, pageSize: 2, ...(cursor ? { cursor } : {}) });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.total).toBe(5);
      expect(r.body.collection).toMatchObject({ id: gems.collection.id, name: 'Gems', published: true });
      tokens.push(...r.body.tokens);
      ids.push(...r.body.tokens.map((t: { tokenId: string }) => t.tokenId));
      cursor = r.body.nextCursor ?? undefined;
      if (!cursor) break;
    }
    expect(ids).toEqual(['1', '2', '9', '10', '100']);
    const [ruby, emerald, topaz, sapphire] = tokens;
    expect(ruby).toMatchObject({ name: 'Ruby', published: true, attributes: [{ trait_type: 'Kind', value: 'Gems' }], imageSource: null });
    expect(ruby.picture).toMatchObject({ field: 'image', ready: true, mimeType: 'image/png', width: 300, height: 200, thumbnail: expect.stringMatching(/^\/media\/b\/[0-9a-f]{64}\/256\.webp$/) });
    expect(ruby.files).toEqual([{ field: 'image', mimeType: 'image/png', filename: 'ruby.png' }]);
    // An uploaded SVG is only ever shown rasterised: a thumbnail, never the original.
    expect(emerald.picture).toMatchObject({ mimeType: 'image/svg+xml', thumbnail: expect.stringMatching(/256\.webp$/), original: null });
    expect(topaz).toMatchObject({ picture: null, imageSource: null });
    expect(sapphire).toMatchObject({ picture: null, imageSource: 'https://example.com/sapphire.png' });
    // The thumbnail is this origin's rendition of the upload.
    const img = await env.app.inject({ method: 'GET', url: ruby.picture.thumbnail });
    expect(img.statusCode).toBe(200);
    expect(img.headers['content-type']).toBe('image/webp');
  });

  it('UpdateToken changes the fields sent and keeps those left out ("" removes one): the stored row and the served document', async () => {
    const p = await project();
    const png = await solidPng(64, 64, '#8e44ad');
    const { client, collection } = await hostCollection(env.baseUrl, p.key, p.id, 'Partial', [{ tokenId: '5', name: 'Amethyst', picture: { bytes: png, filename: 'a.png' } }]);
    await client.updateToken({ collectionId: collection.id, tokenId: '5', token: { tokenId: '5', description: 'Deep purple', external_url: 'https://example.com/5' } as never });
    // Only the name is sent: the description, link and attributes stay.
    await client.updateToken({ collectionId: collection.id, tokenId: '5', token: { name: 'Amethyst (cut)' } as never });
    const row = await env.services.db.query<{ metadata: unknown }>('SELECT metadata FROM collection_tokens WHERE collection_id = $1 AND token_id = $2', [collection.id, '5']);
    const stored = typeof row.rows[0]!.metadata === 'string' ? JSON.parse(row.rows[0]!.metadata as string) : row.rows[0]!.metadata;
    expect(stored).toEqual({ name: 'Amethyst (cut)', description: 'Deep purple', external_url: 'https://example.com/5', attributes: [{ trait_type: 'Kind', value: 'Partial' }] });
    const served = await fetch(`${collection.baseURIs!.tokenMetadataURI}5`);
    expect(served.status).toBe(200);
    expect(await served.json()).toMatchObject({
      name: 'Amethyst (cut)',
      description: 'Deep purple',
      attributes: [{ trait_type: 'Kind', value: 'Partial' }],
      image: expect.stringMatching(/\/media\/b\/[0-9a-f]{64}\/original$/),
    });
    // "" removes a field; a bad link in a partial update is refused and changes nothing.
    const cleared = await rpc(env.app, '/rpc/Collections/UpdateToken', { collectionId: collection.id, tokenId: '5', token: { external_url: '' } }, bearer(p.key));
    expect(cleared.status, JSON.stringify(cleared.body)).toBe(200);
    const bad = await rpc(env.app, '/rpc/Collections/UpdateToken', { collectionId: collection.id, tokenId: '5', token: { name: 'x', external_url: 'javascript:alert(1)' } }, bearer(p.key));
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ error: 'InvalidArgument', cause: expect.stringContaining('external_url') });
    const after = await (await fetch(`${collection.baseURIs!.tokenMetadataURI}5`)).json();
    expect(after).toMatchObject({ name: 'Amethyst (cut)', description: 'Deep purple' });
    expect(after).not.toHaveProperty('external_url');
  });

  it("edits a project's collections as the operator through the Collections service: a link is proven as the project's would be, another project's collection is not found, bad input is a clear error", async () => {
    const p = await project();
    const other = await project();
    const made = await admin('CreateProjectCollection', { projectId: p.id, name: 'Console-made' });
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const c = made.body.collection;
    expect(c).toMatchObject({ published: false, tokenMetadataURI: expect.stringContaining(`/projects/${p.id}/collections/${c.id}/tokens/`) });
    expect((await admin('CreateCollectionToken', { projectId: p.id, collectionId: c.id, tokenId: '3', name: 'Three', attributes: [{ trait_type: 'Level', value: 3 }] })).status).toBe(200);
    const twice = await admin('CreateCollectionToken', { projectId: p.id, collectionId: c.id, tokenId: '3', name: 'Again' });
    expect(twice.body).toMatchObject({ error: 'RequestConflict' });
    // A contract that does not point here and whose owner did not sign: refused as the project's link would be, naming the proof.
    const [nft] = await env.chain.deploy([{ contract: 'DevERC721', args: ['Elsewhere', 'ELS', 'https://example.com/t/', 'https://example.com/c'] }]);
    const unproven = await admin('LinkCollectionContract', { projectId: p.id, collectionId: c.id, chainID: String(env.chainId), contractAddress: nft });
    expect(unproven.status).toBe(403);
    expect(unproven.body).toMatchObject({ error: 'PermissionDenied', cause: expect.stringContaining('ownerSignature') });
    expect((await env.services.db.query('SELECT 1 FROM contract_collections WHERE collection_id = $1', [c.id])).rows).toEqual([]);
    // The operator's word (the page's "Link without proof").
    expect((await admin('LinkCollectionContract', { projectId: p.id, collectionId: c.id, chainID: String(env.chainId), contractAddress: nft, withoutProof: true })).status).toBe(200);
    expect((await env.services.db.query('SELECT 1 FROM contract_collections WHERE collection_id = $1', [c.id])).rows).toHaveLength(1);
    const preview = await admin('CollectionTokenPreview', { projectId: p.id, collectionId: c.id, tokenId: '3' });
    expect(preview.body).toMatchObject({
      served: null,
      notServedBecause: 'the collection is not published',
      document: { name: 'Three', attributes: [{ trait_type: 'Level', value: 3 }] },
      contracts: [{ contractAddress: nft!.toLowerCase(), tokenURI: null, pointsHere: false }],
    });

    for (const [method, args, error, cause] of [
      ['UpdateProjectCollection', { projectId: other.id, collectionId: c.id, name: 'Taken' }, 'NotFound', /no collection/],
      ['CreateCollectionToken', { projectId: other.id, collectionId: c.id, tokenId: '4' }, 'NotFound', /no collection/],
      ['CreateProjectCollection', { projectId: p.id, name: ' ' }, 'InvalidArgument', /name/],
      ['CreateCollectionToken', { projectId: p.id, collectionId: c.id, tokenId: 'four' }, 'InvalidArgument', /tokenId/],
      ['UpdateCollectionToken', { projectId: p.id, collectionId: c.id, tokenId: '3', external_url: 'javascript:alert(1)' }, 'InvalidArgument', /external_url/],
      ['UpdateCollectionToken', { projectId: p.id, collectionId: c.id, tokenId: '99', name: 'Nobody' }, 'NotFound', /no token 99/],
      ['LinkCollectionContract', { projectId: p.id, collectionId: c.id, chainID: 'nowhere', contractAddress: nft }, 'ChainNotFound', /nowhere/],
      ['PublishProjectCollection', { projectId: p.id, collectionId: c.id }, 'RequiredArgument', /published/],
      ['GetProjectListener', { projectId: p.id, chainID: String(env.chainId), id: 12345 }, 'NotFound', /no webhook listener 12345/],
      ['GetEcosystem', { ecosystemId: 9_999_999 }, 'NotFound', /no ecosystem/],
    ] as const) {
      const r = await admin(method, args);
      expect(r.status, `${method} ${JSON.stringify(args)}: ${JSON.stringify(r.body)}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.body.error, `${method}: ${JSON.stringify(r.body)}`).toBe(error);
      expect(r.body.cause).toMatch(cause);
    }
    // Nothing of the refusals was written: the one token, unchanged.
    const rows = await env.services.db.query<{ token_id: string; metadata: unknown }>('SELECT token_id, metadata FROM collection_tokens WHERE collection_id = $1', [c.id]);
    expect(rows.rows.map((r) => r.token_id)).toEqual(['3']);
  });

  it('shows a project only its own collections, and refuses bad input with a clear error, not a 500', async () => {
    const mine = await project();
    const other = await project();
    const { collection } = await hostCollection(env.baseUrl, mine.key, mine.id, 'Private stock', [{ tokenId: '1', name: 'One' }]);
    expect((await admin('ListProjectCollections', { projectId: other.id })).body).toMatchObject({ collections: [], total: 0, nextCursor: null });
    const theirs = await admin('ListCollectionTokens', { projectId: other.id, collectionId: collection.id });
    expect(theirs.status).toBe(400);
    expect(theirs.body).toMatchObject({ error: 'NotFound', cause: expect.stringContaining(`no collection ${collection.id}`) });
    // Deleted through the official client: gone from the console too.
    await new SequenceCollections(env.baseUrl, mine.key).deleteCollection({ collectionId: collection.id });
    expect((await admin('ListProjectCollections', { projectId: mine.id })).body.total).toBe(0);

    for (const [method, args, error, cause] of [
      ['ListProjectCollections', { projectId: 9_999_999 }, 'ProjectNotFound', /no project 9999999/],
      ['ListProjectCollections', { projectId: mine.id, cursor: 'abc' }, 'InvalidArgument', /cursor "abc"/],
      ['ListProjectCollections', { projectId: mine.id, pageSize: 500 }, 'InvalidArgument', /pageSize/],
      ['ListProjectCollections', {}, 'RequiredArgument', /projectId/],
      ['ListCollectionTokens', { projectId: mine.id, collectionId: 'one' }, 'InvalidArgument', /collectionId/],
      ['ListCollectionTokens', { projectId: mine.id, collectionId: collection.id, cursor: '01' }, 'InvalidArgument', /cursor/],
      ['ListCollectionTokens', { projectId: mine.id, collectionId: collection.id }, 'NotFound', /no collection/],
    ] as const) {
      const r = await admin(method, args);
      expect(r.status, `${method} ${JSON.stringify(args)}: ${JSON.stringify(r.body)}`).toBe(400);
      expect(r.body.error).toBe(error);
      expect(r.body.cause).toMatch(cause);
    }
    // The console's own rule: an admin session or token, never a project key.
    expect((await call('ListProjectCollections', { projectId: mine.id })).status).toBe(401);
    expect((await call('ListProjectCollections', { projectId: mine.id }, { 'x-access-key': mine.key })).status).toBe(403);
  });
});
