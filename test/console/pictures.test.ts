// The console's token and directory pictures: a field put through the media pipeline on request (an
// on-chain SVG sanitised and rasterised, a logo fetched from a real local server), answered as
// same-origin paths the page can show, and bad input refused with a clear error.
import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RelayerEnv } from '../support/relayer-env.ts';
import { newSigner } from '../support/sequence-wallet.ts';
import { solidPng } from '../support/media.ts';
import { startRawServer, type RawServer } from '../support/token-chain.ts';
import { bearer, type Call } from './support.ts';
import { consoleRelayerEnv } from '../support/console-env.ts';

let env: RelayerEnv;
let call: Call;
let nft: Address;
let logos: RawServer;
const admin = (method: string, body: unknown = {}) => call(method, body, bearer(env.adminToken));

consoleRelayerEnv((e, c) => {
  env = e;
  call = c;
});
beforeAll(async () => {
  [nft] = await env.chain.deploy([{ contract: 'DevERC721OnChain' }]);
  await env.chain.send([{ address: nft, contract: 'DevERC721OnChain', functionName: 'mint', args: [newSigner().address, 1n] }]);
  const logo = await solidPng(120, 120, '#2255aa');
  logos = await startRawServer((_req, res) => res.writeHead(200, { 'content-type': 'image/png' }).end(logo));
}, 120_000);
afterAll(async () => {
  await logos?.stop();
});

describe('console: token and directory pictures', () => {
  it("answers an on-chain token's picture on the first ask, as a rendition of this origin (never the SVG itself)", async () => {
    const r = await admin('TokenPictures', { chainID: String(env.chainId), contractAddress: nft, tokenID: '1' });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const shown = r.body.pictures.find((p: { ready: boolean }) => p.ready);
    expect(shown).toMatchObject({ ready: true, thumbnail: expect.stringMatching(/^\/media\/b\/[0-9a-f]{64}\/256\.webp$/), original: null });
    const img = await env.app.inject({ method: 'GET', url: shown.thumbnail });
    expect(img.statusCode).toBe(200);
    expect(img.headers['content-type']).toBe('image/webp');
  });

  it("answers a directory entry's logo fetched now, and refuses bad input with a clear error", async () => {
    const token = env.token.toLowerCase() as Address;
    await env.services.contractStore.upsertLayers(env.chainId, [{ address: token, override: { logoURI: `${logos.url}/logo.png` } }]);
    const r = await admin('ContractLogo', { chainID: String(env.chainId), contractAddress: token });
    expect(r.body.logo).toMatchObject({ ready: true, mimeType: 'image/png', width: 120, height: 120, original: expect.stringMatching(/\/original$/) });
    for (const [method, args, error] of [
      ['TokenPictures', { chainID: String(env.chainId), contractAddress: '0x12', tokenID: '1' }, 'InvalidArgument'],
      ['TokenPictures', { chainID: String(env.chainId), contractAddress: nft, tokenID: 'one' }, 'InvalidArgument'],
      ['ContractLogo', { chainID: String(env.chainId) }, 'RequiredArgument'],
    ] as const) {
      const bad = await admin(method, args);
      expect(bad.status, JSON.stringify(bad.body)).toBe(400);
      expect(bad.body.error).toBe(error);
    }
  });
});
