// Collections made in the console, in a real browser (Debian's chromium, playwright-core) against a real
// metarelay on anvil, at 1280 and at 390 px: a collection created, a token added with attributes, a
// picture dropped on it (a real drop event at 1280 px, the file input at 390 px) and shown on its tile,
// the collection published and a contract linked; judged by what the token's metadata URL serves,
// what GetTokenMetadata answers for the linked contract, and the stored rows.
import { createHash } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { solidPng } from '../support/media.ts';
import { startRelayerEnv, type RelayerEnv } from '../support/relayer-env.ts';
import { eventually } from '../support/token-chain.ts';
import { PHONE, WIDE, launchBrowser, loadedWidth, shot as shotOf, signIn } from './browser.ts';

let env: RelayerEnv;
let browser: Browser;
let page: Page;
let projectId: number;
const OWNER = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266';
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function admin(method: string, body: unknown) {
  const r = await fetch(`${env.baseUrl}/rpc/Console/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${env.adminToken}` },
    body: JSON.stringify(body),
  });
  expect(r.status, `${method}: ${r.status}`).toBe(200);
  return r.json();
}

beforeAll(async () => {
  // Indexed (not followed: nothing starts the background work), so the chain can have webhook listeners.
  env = await startRelayerEnv({ indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 100 } });
  projectId = (await admin('CreateProject', { name: 'builder' })).project.id;
  browser = await launchBrowser();
  page = await browser.newPage({ viewport: WIDE });
  await signIn(page, env.baseUrl, env.adminToken);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await env?.close();
});

const shot = (name: string) => shotOf(page, name);

/** Creates a collection and a token with two attributes through the page; the token's editor is open after. */
async function collectionWithToken(name: string, tokenId: string, tokenName: string, attrs: [string, string][]) {
  await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/collections`);
  await page.getByTestId('new-collection-name').fill(name);
  await page.getByTestId('new-collection-description').fill(`${name}, made in the console`);
  await page.getByTestId('new-collection-create').click();
  await page.getByTestId('collection-name').filter({ hasText: name }).waitFor();
  await page.getByTestId('new-token-open').click();
  await page.getByTestId('new-token-id').fill(tokenId);
  await page.getByTestId('new-token-name').fill(tokenName);
  for (const [i, [trait, value]] of attrs.entries()) {
    if (i > 0) await page.getByTestId('new-token-attr-add').click();
    await page.getByTestId(`new-token-attr-trait-${i}`).fill(trait);
    await page.getByTestId(`new-token-attr-value-${i}`).fill(value);
  }
  await page.getByTestId('new-token-create').click();
  await page.getByTestId('token-editor').waitFor();
  const id = Number(/collections\/(\d+)/.exec(page.url())![1]);
  return id;
}

/** The picture on the token's tile (and in its editor) has loaded from this origin. */
async function pictureShown(tokenId: string) {
  const tile = page.getByTestId(`token-image-${tokenId}`);
  await tile.waitFor();
  await page.waitForFunction((el) => (el as HTMLImageElement).complete && (el as HTMLImageElement).naturalWidth > 0, await tile.elementHandle());
  return tile.evaluate(loadedWidth);
}

const storedToken = async (collectionId: number, tokenId: string) => {
  const r = await env.services.db.query<{ metadata: unknown; private: boolean }>('SELECT metadata, private FROM collection_tokens WHERE collection_id = $1 AND token_id = $2', [collectionId, tokenId]);
  const m = r.rows[0]?.metadata;
  return { metadata: typeof m === 'string' ? JSON.parse(m) : m, private: r.rows[0]?.private };
};
const storedAssets = async (collectionId: number) =>
  (
    await env.services.db.query<{ token_id: string; metadata_field: string; sha256: string | null }>('SELECT token_id, metadata_field, sha256 FROM collection_assets WHERE collection_id = $1', [
      collectionId,
    ])
  ).rows;

describe('console: collections made in the browser', () => {
  it('at 1280 px: creates a collection, a token with attributes, drops its picture, publishes, links a contract; tokenURI and GetTokenMetadata serve it', async () => {
    const png = await solidPng(320, 240, '#c0392b');
    const collectionId = await collectionWithToken('Gems', '1', 'Ruby', [
      ['Color', 'Red'],
      ['Rarity', '5'],
    ]);
    // A real drop: a DataTransfer holding the file, dropped on the token's drop target.
    const transfer = await page.evaluateHandle((b64) => {
      const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], 'ruby.png', { type: 'image/png' }));
      return dt;
    }, png.toString('base64'));
    await page.getByTestId('token-drop').dispatchEvent('dragover', { dataTransfer: transfer });
    await page.getByTestId('token-drop').dispatchEvent('drop', { dataTransfer: transfer });
    expect(await pictureShown('1')).toBeGreaterThan(0);
    await page.getByTestId('token-drop-image').waitFor();
    // Not served yet: the preview says so, and the URL answers 404.
    await page.getByTestId('token-preview-state').filter({ hasText: 'not published' }).waitFor();
    const url = (await page.getByTestId('token-preview-url').textContent())!.trim();
    expect((await fetch(url)).status).toBe(404);

    await page.getByTestId('collection-publish').click();
    await page.getByTestId('collection-unpublish').waitFor();
    await page.getByTestId('token-open-1').click();
    await page.getByTestId('token-preview-state').filter({ hasText: 'served now' }).waitFor();
    expect(await page.getByTestId('token-preview-json').textContent()).toContain('"Ruby"');

    // What the token's URL serves, and the rows behind it.
    const image = `${env.baseUrl}/media/b/${sha(png)}/original`;
    const served = await fetch(url);
    expect(served.status).toBe(200);
    expect(await served.json()).toEqual({
      name: 'Ruby',
      attributes: [
        { trait_type: 'Color', value: 'Red' },
        { trait_type: 'Rarity', value: 5 },
      ],
      image,
    });
    expect(await storedToken(collectionId, '1')).toEqual({
      metadata: {
        name: 'Ruby',
        attributes: [
          { trait_type: 'Color', value: 'Red' },
          { trait_type: 'Rarity', value: 5 },
        ],
      },
      private: false,
    });
    expect(await storedAssets(collectionId)).toEqual([{ token_id: '1', metadata_field: 'image', sha256: sha(png) }]);

    // The collection's own picture: the image of its contractURI document.
    const logo = await solidPng(96, 96, '#2c3e50');
    await page.getByTestId('collection-picture-open').click();
    await page.getByTestId('collection-drop-input').setInputFiles({ name: 'gems-logo.png', mimeType: 'image/png', buffer: logo });
    await page.getByTestId('collection-drop-image').waitFor();
    const contractDoc = await fetch(url.replace(/\/tokens\/1$/, ''));
    expect(await contractDoc.json()).toMatchObject({ name: 'Gems', description: 'Gems, made in the console', image: `${env.baseUrl}/media/b/${sha(logo)}/original` });
    expect(await storedAssets(collectionId)).toEqual(
      expect.arrayContaining([
        { token_id: '', metadata_field: 'image', sha256: sha(logo) },
        { token_id: '1', metadata_field: 'image', sha256: sha(png) },
      ]),
    );

    // A contract deployed with the collection's URIs and linked from the page (its contractURI is the proof).
    const uris = { token: url.slice(0, -1), contract: url.replace(/\/tokens\/1$/, '') };
    const [nft] = await env.chain.deploy([{ contract: 'DevERC721', args: ['Gems', 'GEM', uris.token, uris.contract] }]);
    await env.chain.send([{ address: nft!, contract: 'DevERC721', functionName: 'mint', args: [OWNER as Address, 1n] }]);
    const contract = nft!.toLowerCase();
    await page.getByTestId('link-open').click();
    await page.getByTestId('link-address').fill(contract);
    await page.getByTestId('link-contract').click();
    await page.getByTestId(`linked-${contract}`).waitFor();
    const link = await env.services.db.query<{ collection_id: number | string }>('SELECT collection_id FROM contract_collections WHERE chain_id = $1 AND contract_address = $2', [
      env.chainId,
      contract,
    ]);
    expect(Number(link.rows[0]?.collection_id)).toBe(collectionId);
    const rpc = await eventually(
      async () =>
        (await (
          await fetch(`${env.baseUrl}/rpc/Metadata/GetTokenMetadata`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-access-key': env.accessKey },
            body: JSON.stringify({ chainID: String(env.chainId), contractAddress: contract, tokenIDs: ['1'] }),
          })
        ).json()) as { tokenMetadata: Array<Record<string, unknown>> },
      (r) => expect(r.tokenMetadata?.[0]?.name).toBe('Ruby'),
      30_000,
    );
    expect(rpc.tokenMetadata[0]).toMatchObject({
      name: 'Ruby',
      image,
      attributes: [
        { trait_type: 'Color', value: 'Red' },
        { trait_type: 'Rarity', value: 5 },
      ],
    });
    // The preview reads the contract's tokenURI: it points here.
    await page.getByTestId('token-open-1').click();
    await page.getByTestId('token-preview').getByText('points here').waitFor();
    await shot('collection-editor');
  });

  it('at 390 px: the same with the file chosen on the drop target, edited and unpublished', async () => {
    await page.setViewportSize(PHONE);
    const png = await solidPng(200, 200, '#27ae60');
    const collectionId = await collectionWithToken('Phone gems', '7', 'Emerald', [['Color', 'Green']]);
    // A file that is not a picture, whatever its name: refused, saying why, and nothing is kept of it.
    await page.getByTestId('token-drop-input').setInputFiles({ name: 'fake.png', mimeType: 'image/png', buffer: Buffer.from('<html><body>not a picture</body></html>') });
    await page.getByTestId('token-drop-error').filter({ hasText: 'UNSUPPORTED_TYPE' }).waitFor();
    expect(await storedAssets(collectionId)).toEqual([]);
    // The upload route is the console's: no session, no upload; a project key is not an admin's.
    const route = `${env.baseUrl}/console/upload/projects/${projectId}/collections/${collectionId}/tokens/7/image`;
    expect((await fetch(route, { method: 'PUT', body: new Uint8Array(png) })).status).toBe(401);
    expect((await fetch(route, { method: 'PUT', body: new Uint8Array(png), headers: { 'x-access-key': env.accessKey } })).status).toBe(403);
    expect(await storedAssets(collectionId)).toEqual([]);
    await page.getByTestId('token-drop-input').setInputFiles({ name: 'emerald.png', mimeType: 'image/png', buffer: png });
    expect(await pictureShown('7')).toBeGreaterThan(0);
    // A partial edit from the editor: the description added, the attributes kept.
    await page.getByTestId('token-description').fill('Green and clear');
    await page.getByTestId('token-save').click();
    await page.getByTestId('token-saved').waitFor();
    await page.getByTestId('collection-publish').click();
    await page.getByTestId('collection-unpublish').waitFor();
    const layout = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(layout, 'the page scrolls sideways at 390 px').toBeLessThanOrEqual(0);
    await page.screenshot({ path: 'test-results/console/collection-phone-390.png', fullPage: true });

    const url = (await page.getByTestId('token-preview-url').textContent())!.trim();
    const served = await fetch(url);
    expect(served.status).toBe(200);
    expect(await served.json()).toEqual({
      name: 'Emerald',
      description: 'Green and clear',
      attributes: [{ trait_type: 'Color', value: 'Green' }],
      image: `${env.baseUrl}/media/b/${sha(png)}/original`,
    });
    expect(await storedAssets(collectionId)).toEqual([{ token_id: '7', metadata_field: 'image', sha256: sha(png) }]);

    // Unpublishing asks first; Cancel leaves it served, the red button stops it.
    await page.getByTestId('collection-unpublish').click();
    await page.getByTestId('collection-unpublish-cancel').click();
    expect((await fetch(url)).status).toBe(200);
    await page.getByTestId('collection-unpublish').click();
    await page.getByTestId('collection-unpublish-yes').click();
    await page.getByTestId('collection-publish').waitFor();
    expect((await fetch(url)).status).toBe(404);
    const row = await env.services.db.query<{ private: boolean }>('SELECT private FROM collections WHERE id = $1', [collectionId]);
    expect(row.rows[0]?.private).toBe(true);
    await page.setViewportSize(WIDE);
  });

  it("shows ecosystems with their projects and rules, and a project's listeners; removing a listener asks first (1280 and 390 px)", async () => {
    const games = await env.services.ecosystems.create('games');
    await env.services.projects.setEcosystem(projectId, games.id);
    const rule = await env.call('AddEcosystemGasSponsor', { ecosystemId: games.id, address: env.token, kind: 'CONTRACT', name: 'fusd for all' }, { authorization: `Bearer ${env.adminToken}` });
    expect(rule.status, JSON.stringify(rule.body)).toBe(200);
    await page.goto(`${env.baseUrl}/console/#/ecosystems`);
    const row = page.getByTestId(`ecosystem-${games.id}`);
    await row.waitFor();
    expect(await row.textContent()).toContain('builder');
    expect(await row.getByTestId('ecosystem-rules').textContent()).toBe('1 active of 1');
    await page.getByTestId(`ecosystem-open-${games.id}`).click();
    await page.getByTestId('ecosystem-name').filter({ hasText: 'games' }).waitFor();
    const ruleRow = page.getByTestId(`ecosystem-rule-${rule.body.gasSponsor.id}`);
    expect(await ruleRow.textContent()).toContain('fusd for all');
    expect(await page.getByTestId('ecosystem-projects').textContent()).toBe('builder');
    await shot('ecosystem');

    const listeners = env.services.events.listeners;
    const filter = { events: ['Transfer'], topics: [], contractAddresses: [env.token.toLowerCase()], accounts: [], tokenIDs: [] };
    const kept = await listeners.add({ projectId, chainId: env.chainId, url: 'https://hooks.example.com/mints', name: 'mints', filter, fromBlock: 1, max: 10 });
    const gone = await listeners.add({ projectId, chainId: env.chainId, url: 'https://hooks.example.com/old', name: 'old', filter, fromBlock: 1, max: 10 });
    await page.goto(`${env.baseUrl}/console/#/projects/${projectId}/listeners`);
    await page.getByTestId(`listener-${kept!.listener.id}`).waitFor();
    await page.getByTestId(`listener-open-${kept!.listener.id}`).click();
    expect(await page.getByTestId('listener-contracts').textContent()).toBe(env.token.toLowerCase());
    await shot('listeners');
    await page.getByTestId(`listener-remove-${gone!.listener.id}`).click();
    await page.getByTestId(`listener-remove-${gone!.listener.id}-cancel`).click();
    const deleted = async (id: number) => (await env.services.db.query<{ deleted: boolean }>('SELECT deleted_at IS NOT NULL AS deleted FROM webhooks WHERE id = $1', [id])).rows[0]?.deleted;
    expect(await deleted(gone!.listener.id)).toBe(false);
    await page.getByTestId(`listener-remove-${gone!.listener.id}`).click();
    await page.getByTestId(`listener-remove-${gone!.listener.id}-yes`).click();
    await page.getByTestId(`listener-${gone!.listener.id}`).waitFor({ state: 'detached' });
    expect(await deleted(gone!.listener.id)).toBe(true);
    expect(await deleted(kept!.listener.id)).toBe(false);
  });
});
