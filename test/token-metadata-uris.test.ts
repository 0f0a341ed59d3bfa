// Token metadata end to end: every URI spelling found on chain, ERC-1155 {id} templates, token id
// forms, redirects and hostile documents, through the HTTP API against a real anvil and real local
// origins. The fetcher's own unit tests live in metadata-fetch/metadata-uri.test.ts.

import type { Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { erc1155IdHex, startOriginServer, type OriginServer } from '../src/devchain/index.ts';
import { startTestService, type TestService } from './support/service.ts';
import { b64, explain, getRest, getTokenMetadata, secondProcess, startRawServer, startTokenChain, type RawServer, type TokenChain } from './support/token-chain.ts';

const CID0 = 'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG';
const CID1 = 'bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi';
const CID2 = 'QmT78zSuBmuS4z925WZfrqQ1qHaJ56DQaTfyMUF7F8ff5o';
const TXID = 'bNbA3TEQVL60xlgCcqdz4ZPHFZ711cZ3hmkpGttDt_U';
const MB = 1024 * 1024;
const MAX_ID = (1n << 256n) - 1n;

let chain: TokenChain;
let origin: OriginServer; // plain http documents
let gateway: OriginServer; // the only IPFS gateway the service knows
let arweave: OriginServer;
let raw: RawServer; // redirects and the endless body
let t: TestService;
let uris: Address; // TestTokenURI: one id per URI form
let c1155Path: Address;
let c1155File: Address;
let c1155Dec: Address;

/** The 50 MB body: how much was written before the reader hung up. */
const big = { written: 0, finished: false, closedEarly: false };

const onChainJson = (name: string) => JSON.stringify({ name, description: `${name} (100% on-chain)`, attributes: [{ trait_type: 'Form', value: name }] });

// tokenURI per id, and the name its document carries.
let FORMS: Array<{ id: string; uri: string; name: string }>;

beforeAll(async () => {
  [chain, origin, gateway, arweave] = await Promise.all([startTokenChain(), startOriginServer(), startOriginServer(), startOriginServer()]);
  raw = await startRawServer((_req, res, url) => {
    if (url.pathname === '/r1') {
      res.writeHead(302, { location: '/r2' }).end();
    } else if (url.pathname === '/r2') {
      res.writeHead(301, { location: `${origin.url}/redirected.json` }).end();
    } else if (url.pathname === '/big') {
      // 50 MB of one JSON string, streamed without Content-Length and with backpressure.
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      res.on('close', () => {
        if (!big.finished) big.closedEarly = true;
      });
      res.write('{"name":"big","pad":"');
      const pump = () => {
        while (big.written < 50 * MB) {
          if (res.destroyed) return;
          big.written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        big.finished = true;
        res.end('"}');
      };
      pump();
    } else {
      res.writeHead(404).end();
    }
  });

  const svg = '<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)" viewBox="0 0 10 10">' + '<script>alert(document.cookie)</script><rect width="10" height="10" fill="red"/></svg>';
  FORMS = [
    { id: '1', uri: `${origin.url}/t/1`, name: 'http origin' },
    { id: '2', uri: `ipfs://${CID0}/meta/2.json`, name: 'ipfs path' },
    { id: '3', uri: `ipfs://ipfs/${CID1}`, name: 'ipfs double prefix' },
    { id: '4', uri: CID2, name: 'bare CID' },
    { id: '5', uri: `https://ipfs.io/ipfs/${CID0}/x.json`, name: 'public gateway URL' },
    { id: '6', uri: `ar://${TXID}`, name: 'arweave' },
    { id: '7', uri: `data:application/json;base64,${b64(onChainJson('base64 data'))}`, name: 'base64 data' },
    { id: '8', uri: `data:application/json,${encodeURIComponent(onChainJson('percent data'))}`, name: 'percent data' },
    { id: '9', uri: `data:application/json;utf8,${onChainJson('utf8 data')}`, name: 'utf8 data' },
    { id: '10', uri: onChainJson('raw JSON'), name: 'raw JSON' },
  ];
  origin.setDocument('/t/1', { name: 'http origin', image: `${origin.url}/img/1.png` });
  gateway.setDocument(`/ipfs/${CID0}/meta/2.json`, { name: 'ipfs path', image: `ipfs://${CID0}/img/2.png` });
  gateway.setDocument(`/ipfs/${CID1}`, { name: 'ipfs double prefix' });
  gateway.setDocument(`/ipfs/${CID2}`, { name: 'bare CID' });
  gateway.setDocument(`/ipfs/${CID0}/x.json`, { name: 'public gateway URL' });
  arweave.setDocument(`/${TXID}`, { name: 'arweave', image: `ar://${TXID}/image.png` });
  origin.setDocument('/t/31', { name: 'thirty-one' });
  origin.setDocument('/html', '<!doctype html><html><body><h1>Welcome to nginx!</h1></body></html>', { contentType: 'text/html' });
  origin.setDocument('/redirected.json', { name: 'after redirects' });
  origin.setDocument('/t/50', { name: 'fifty' });
  origin.setDocument('/p/' + erc1155IdHex(7n) + '/meta.json', { name: 'id in path', decimals: 2 });
  origin.setDocument('/f/' + erc1155IdHex(7n) + '.json', { name: 'id in file name' });
  for (const id of ['5', '6', '8']) origin.setDocument(`/dec/${id}.json`, { name: `decimal ${id}` });

  const others: Record<string, string> = {
    '31': `${origin.url}/t/31`,
    '40': `${origin.url}/html`,
    '41': `${raw.url}/big`,
    '42': `data:application/json;base64,${b64(JSON.stringify({ name: 'svg', image: `data:image/svg+xml;base64,${b64(svg)}`, image_data: svg }))}`,
    '43': `${raw.url}/r1`,
    '50': `${origin.url}/t/50`,
    '51': `data:application/json;base64,${b64(JSON.stringify({ name: 'fifty-one' }))}`,
    '52': `${origin.url}/html`,
    [MAX_ID.toString()]: `data:application/json;base64,${b64(JSON.stringify({ name: 'the last token' }))}`,
  };
  [uris, c1155Path, c1155File, c1155Dec] = await chain.deploy([{ contract: 'TestTokenURI' }, { contract: 'TestURI1155' }, { contract: 'TestURI1155' }, { contract: 'TestURI1155' }]);
  await chain.send([
    ...[...FORMS.map((f) => [f.id, f.uri] as const), ...Object.entries(others)].map(([id, uri]) => ({
      address: uris,
      contract: 'TestTokenURI',
      functionName: 'setTokenURI',
      args: [BigInt(id), uri],
    })),
    { address: c1155Path, contract: 'TestURI1155', functionName: 'setURI', args: [`${origin.url}/p/{id}/meta.json`] },
    { address: c1155File, contract: 'TestURI1155', functionName: 'setURI', args: [`${origin.url}/f/{id}.json`] },
    { address: c1155Dec, contract: 'TestURI1155', functionName: 'setURI', args: [`${origin.url}/dec/{id}.json`] },
  ]);

  t = await startTestService({
    chains: [chain.chainConfig],
    ipfsGateways: [`${gateway.url}/ipfs/`],
    arweaveGateway: `${arweave.url}/`,
    metadata: { fetchTimeoutMs: 2_000, inlineWaitMs: 15_000 },
  });
});

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop(), gateway?.stop(), arweave?.stop(), raw?.stop()]);
});

describe('URI forms on chain', () => {
  it('resolves http, ipfs (three spellings), a public gateway URL, ar://, data: (three encodings) and raw JSON', async () => {
    const tokens = await getTokenMetadata(
      t,
      uris,
      FORMS.map((f) => f.id),
    );
    expect(tokens.map((x) => [x.tokenId, x.status, x.name])).toEqual(FORMS.map((f) => [f.id, 'AVAILABLE', f.name]));
    for (const x of tokens) {
      expect(x.failureReason).toBeUndefined();
      expect(x.contractAddress).toBe(uris.toLowerCase());
      expect(x.chainId).toBe(31337);
    }
    // Media references are turned into URLs a client can load, through the configured gateways.
    expect(tokens[1].image).toBe(`${gateway.url}/ipfs/${CID0}/img/2.png`);
    expect(tokens[5].image).toBe(`${arweave.url}/${TXID}/image.png`);
    // On-chain documents keep their fields; the literal "%" of a ;utf8 body is not percent-decoded.
    expect(tokens[8].description).toBe('utf8 data (100% on-chain)');
    expect(tokens[9].attributes).toEqual([{ trait_type: 'Form', value: 'raw JSON' }]);
  });

  it('fetches a public gateway URL through the configured gateway, never the public host', async () => {
    const e = await explain(t, uris, 5);
    expect(e.tokenUri).toBe(`https://ipfs.io/ipfs/${CID0}/x.json`);
    expect(e.trace.attempts.map((a) => [a.url, a.status])).toEqual([[`${gateway.url}/ipfs/${CID0}/x.json`, 200]]);
    expect(gateway.requestCount(`/ipfs/${CID0}/x.json`)).toBe(1);
    // ipfs://ipfs/<cid> and the bare CID reach the same /ipfs/<cid> gateway path.
    expect(gateway.requestCount(`/ipfs/${CID1}`)).toBe(1);
    expect(gateway.requestCount(`/ipfs/${CID2}`)).toBe(1);
    expect(arweave.requestCount(`/${TXID}`)).toBe(1);
  });
});

describe('ERC-1155 {id} templates', () => {
  it('substitutes the 64-hex id in a path segment and in a file name', async () => {
    const [inPath] = await getTokenMetadata(t, c1155Path, ['7']);
    const [inFile] = await getTokenMetadata(t, c1155File, ['7']);
    expect([inPath.status, inPath.name, inPath.decimals]).toEqual(['AVAILABLE', 'id in path', 2]);
    expect([inFile.status, inFile.name]).toEqual(['AVAILABLE', 'id in file name']);
    const e = await explain(t, c1155File, 7);
    expect(e.trace.method).toBe('uri');
    expect(e.tokenUri).toBe(`${origin.url}/f/{id}.json`);
    expect(e.trace.attempts.map((a) => [a.url, a.status])).toEqual([[`${origin.url}/f/${erc1155IdHex(7n)}.json`, 200]]);
  });

  it('falls back to the decimal id on a 404 and asks the next token of the contract in decimal first', async () => {
    const hexPath = (id: number) => `/dec/${erc1155IdHex(BigInt(id))}.json`;
    const [five] = await getTokenMetadata(t, c1155Dec, ['5']);
    expect([five.status, five.name]).toEqual(['AVAILABLE', 'decimal 5']);
    expect(origin.requestCount(hexPath(5))).toBe(1);
    expect(origin.requestCount('/dec/5.json')).toBe(1);
    const e = await explain(t, c1155Dec, 5);
    expect(e.trace.idVariant).toBe('decimal');
    expect(e.trace.attempts.map((a) => a.status)).toEqual([404, 200]);

    const [six] = await getTokenMetadata(t, c1155Dec, ['6']);
    expect([six.status, six.name]).toEqual(['AVAILABLE', 'decimal 6']);
    expect(origin.requestCount(hexPath(6))).toBe(0);
    expect(origin.requestCount('/dec/6.json')).toBe(1);

    // The spelling is stored with the contract: another process sharing the database knows it too.
    const other = await secondProcess(t, { chains: [chain.chainConfig], metadata: { fetchTimeoutMs: 2_000, inlineWaitMs: 15_000 } });
    try {
      const [eight] = await getTokenMetadata({ app: other.app, accessKey: t.accessKey }, c1155Dec, ['8']);
      expect([eight.status, eight.name]).toEqual(['AVAILABLE', 'decimal 8']);
      expect(origin.requestCount(hexPath(8))).toBe(0);
    } finally {
      await other.close();
    }
  });
});

describe('token id forms', () => {
  it('treats 0x1f and 31 as the same token', async () => {
    const hex = await getRest(t, `/tokens/anvil/${uris}/0x1f`);
    const dec = await getRest(t, `/tokens/anvil/${uris}/31`);
    expect(hex.status).toBe(200);
    expect(hex.body).toHaveLength(1);
    expect(hex.body[0]).toMatchObject({ tokenId: '31', name: 'thirty-one', status: 'AVAILABLE' });
    expect(dec.text).toBe(hex.text);
    expect(dec.headers.etag).toBe(hex.headers.etag);
    const rpcForms = await getTokenMetadata(t, uris, ['0x1F', 31, '31']);
    expect(rpcForms.map((x) => [x.tokenId, x.name])).toEqual([
      ['31', 'thirty-one'],
      ['31', 'thirty-one'],
      ['31', 'thirty-one'],
    ]);
    expect(origin.requestCount('/t/31')).toBe(1);
  });

  it('serves the largest uint256 id in both spellings, explains it, and refuses one past it', async () => {
    const hex = `0x${MAX_ID.toString(16)}`;
    const res = await getRest(t, `/tokens/anvil/${uris}/${hex},${MAX_ID}`);
    expect(res.status).toBe(200);
    expect(res.body.map((x: { tokenId: string; name: string }) => [x.tokenId, x.name])).toEqual([
      [MAX_ID.toString(), 'the last token'],
      [MAX_ID.toString(), 'the last token'],
    ]);
    const e = await explain(t, uris, hex);
    expect(e.status).toBe('AVAILABLE');
    const over = await getRest(t, `/tokens/anvil/${uris}/${MAX_ID + 1n}`);
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ error: 'InvalidArgument', code: 2001 });
  });
});

describe('redirects', () => {
  it('follows a redirect chain across servers to the JSON document', async () => {
    const [x] = await getTokenMetadata(t, uris, ['43']);
    expect([x.status, x.name]).toEqual(['AVAILABLE', 'after redirects']);
    const e = await explain(t, uris, 43);
    expect(e.trace.attempts.map((a) => [a.url, a.status, a.redirectedTo])).toEqual([
      [`${raw.url}/r1`, 302, `${raw.url}/r2`],
      [`${raw.url}/r2`, 301, `${origin.url}/redirected.json`],
      [`${origin.url}/redirected.json`, 200, undefined],
    ]);
  });
});

describe('hostile and broken documents', () => {
  it('cuts a 50 MB streamed body at the 2 MB cap: TOO_LARGE', async () => {
    const [x] = await getTokenMetadata(t, uris, ['41']);
    expect(x.status).toBe('NOT_AVAILABLE');
    expect(x.failureReason).toBe('TOO_LARGE');
    expect(x.name).toBe('');
    const e = await explain(t, uris, 41);
    const [attempt] = e.trace.attempts;
    expect(attempt.error).toBe('TOO_LARGE');
    expect(attempt.bytes).toBeGreaterThan(2 * MB);
    expect(attempt.bytes).toBeLessThan(2 * MB + 256 * 1024);
    // The reader hung up: the origin never got to write the whole 50 MB.
    await expect.poll(() => big.closedEarly, { timeout: 5_000 }).toBe(true);
    expect(big.finished).toBe(false);
    expect(big.written).toBeLessThan(50 * MB);
  });

  it('reports HTML where JSON was expected as INVALID_JSON', async () => {
    const [x] = await getTokenMetadata(t, uris, ['40']);
    expect([x.status, x.failureReason]).toEqual(['NOT_AVAILABLE', 'INVALID_JSON']);
    expect(x.failureMessage).toMatch(/HTML/);
  });

  it('serves an on-chain SVG image without its <script> and event handlers', async () => {
    const [x] = await getTokenMetadata(t, uris, ['42']);
    expect([x.status, x.name]).toEqual(['AVAILABLE', 'svg']);
    const prefix = 'data:image/svg+xml;base64,';
    expect(x.image.startsWith(prefix)).toBe(true);
    const served = Buffer.from(x.image.slice(prefix.length), 'base64').toString('utf8');
    expect(served).toMatch(/<svg[\s>]/);
    expect(served).toMatch(/<rect/);
    expect(served).not.toMatch(/<script/i);
    expect(served).not.toMatch(/alert|onload/i);
    expect(x.image_data).toMatch(/<rect/);
    expect(x.image_data).not.toMatch(/<script|onload/i);
  });

  it('answers 200 with TOKEN_NOT_FOUND for a token whose tokenURI reverts', async () => {
    const res = await getRest(t, `/tokens/anvil/${uris}/999`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toMatchObject({ tokenId: '999', status: 'NOT_AVAILABLE', failureReason: 'TOKEN_NOT_FOUND', name: '' });
    expect(res.body[0].failureMessage).toMatch(/tokenURI\(999\) reverted/);
  });
});

describe('mixed batches', () => {
  it('returns per-token results in request order, duplicates preserved, when some tokens fail', async () => {
    const before = origin.requestCount('/t/50');
    const tokens = await getTokenMetadata(t, uris, ['50', '998', '51', '50', '52', '998', '0x33']);
    expect(tokens.map((x) => [x.tokenId, x.status, x.name, x.failureReason])).toEqual([
      ['50', 'AVAILABLE', 'fifty', undefined],
      ['998', 'NOT_AVAILABLE', '', 'TOKEN_NOT_FOUND'],
      ['51', 'AVAILABLE', 'fifty-one', undefined],
      ['50', 'AVAILABLE', 'fifty', undefined],
      ['52', 'NOT_AVAILABLE', '', 'INVALID_JSON'],
      ['998', 'NOT_AVAILABLE', '', 'TOKEN_NOT_FOUND'],
      ['51', 'AVAILABLE', 'fifty-one', undefined],
    ]);
    expect(tokens[3]).toEqual(tokens[0]);
    // A duplicate is one token: fetched once.
    expect(origin.requestCount('/t/50') - before).toBe(1);

    const rest = await getRest(t, `/tokens/anvil/${uris}/52,50,998,50`);
    expect(rest.status).toBe(200);
    expect(rest.body.map((x: { tokenId: string; status: string }) => [x.tokenId, x.status])).toEqual([
      ['52', 'NOT_AVAILABLE'],
      ['50', 'AVAILABLE'],
      ['998', 'NOT_AVAILABLE'],
      ['50', 'AVAILABLE'],
    ]);
  });
});
