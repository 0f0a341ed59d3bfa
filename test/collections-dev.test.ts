// `metarelay dev` hosts a sample collection: its ERC-721's base URI points at this service, and
// GetTokenMetadata on that contract (the official client) shows the collection's tokens with their
// pictures, stored in the dev media store and served by the media routes.
import { SequenceMetadata } from '@0xsequence/metadata';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startCli } from './support/cli.ts';
import { createTestDb, type TestDb } from './support/db.ts';
import { REPO_ROOT } from '../src/devchain/index.ts';
import { TEST_DB } from './support/env.ts';

const dir = mkdtempSync(join(tmpdir(), 'metarelay-coll-dev-'));
let testDb: TestDb | undefined;
let env: Record<string, string> = {};

beforeAll(async () => {
  // The contracts the other chain tests compiled: dev loads them instead of running solc again.
  const compiled = join(REPO_ROOT, 'node_modules/.cache/metarelay/solc');
  if (existsSync(compiled)) cpSync(compiled, join(dir, 'data', 'cache'), { recursive: true });
  if (TEST_DB === 'postgres') {
    testDb = await createTestDb();
    env = { DATABASE_URL: testDb.location };
  }
});
afterAll(async () => {
  await testDb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

it('dev mode owns a published sample collection that a fresh ERC-721 points at, read through GetTokenMetadata', async () => {
  const manifestPath = join(dir, 'manifest.json');
  const dev = startCli(['dev', '--port', '0', '--data', join(dir, 'data'), '--manifest', manifestPath], env);
  try {
    await dev.waitFor(/metarelay dev is ready/, 300_000);
    const m = JSON.parse(readFileSync(manifestPath, 'utf8'));
    const c = m.collection as { id: number; contract: string; tokens: string[]; tokenMetadataURI: string };
    expect(c.tokenMetadataURI).toMatch(new RegExp(`^${m.baseUrl}/projects/\\d+/collections/${c.id}/tokens/$`));
    expect(dev.output()).toContain(`/tokens/anvil/${c.contract}/1,2,3`);
    const client = new SequenceMetadata(m.baseUrl, m.accessKey);
    const { tokenMetadata } = await client.getTokenMetadata({ chainID: 'anvil', contractAddress: c.contract, tokenIDs: c.tokens });
    expect(tokenMetadata.map((t) => t.name)).toEqual(['Ruby', 'Emerald', 'Sapphire']);
    expect(tokenMetadata[0]).toMatchObject({ status: 'AVAILABLE', attributes: [{ trait_type: 'Colour', value: 'Ruby' }] });
    const image = await fetch(tokenMetadata[0]!.image!);
    expect(image.status).toBe(200);
    expect(image.headers.get('content-type')).toBe('image/png');
  } finally {
    await dev.stop();
  }
}, 400_000);
