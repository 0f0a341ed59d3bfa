// Fair shares of a key's metadata reads by cost (http/metadata/read-shares.ts): a publishable key ships in
// apps, so one client of it sends the largest batches there are (50 contracts × 50 ids) at once while a
// second client of the same key, from another /24, reads as usual over RPC and REST. Judged by counts,
// never latency: the second client's answers are all there and equal to what each token's URI serves,
// none refused; the attacker's past its share refused 429 with Retry-After and the share's name, exactly
// as many of its reads done as its share pays for. Defaults everywhere but the refill rate (near nothing,
// so the counts do not depend on how long the test takes).
import { parseAbi, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../src/config/load.ts';
import { devPublicClient } from '../src/devchain/index.ts';
import { readCost } from '../src/http/metadata/read-shares.ts';
import { scrape, startTestService, type TestService } from './support/service.ts';
import { startRawServer, startTokenChain, type RawServer, type TokenChain, type WireToken } from './support/token-chain.ts';

const abi = parseAbi(['function uri(uint256) view returns (string)']);
const IDS = Array.from({ length: 100 }, (_, i) => String(i + 1));

let chain: TokenChain;
let origin: RawServer;
let t: TestService;
let nft: Address;
/** What each token's URI serves, read from the chain and the origin (not from the service). */
const truth = new Map<string, { name: string; description: string; attributes: unknown }>();

const document = (id: string) => ({ name: `token ${id}`, description: `the ${id}th of its kind`, attributes: [{ trait_type: 'n', value: Number(id) }] });
const rotated = (k: number) => [...IDS.slice(k % IDS.length), ...IDS.slice(0, k % IDS.length)];

/** 50 spellings of one address (its letters' cases): keys of a batch that name one contract 50 times. */
function spellings(a: Address, n: number): string[] {
  const letters = [...a.slice(2)].flatMap((ch, i) => (/[a-f]/.test(ch) ? [i + 2] : []));
  const out = Array.from({ length: n }, (_, k) => [...a].map((ch, i) => (letters.includes(i) && (k >> letters.indexOf(i)) & 1 ? ch.toUpperCase() : ch)).join(''));
  expect(new Set(out).size).toBe(n);
  return out;
}

function post(from: string, method: string, body: unknown) {
  return t.app.inject({
    method: 'POST',
    url: `/rpc/Metadata/${method}`,
    headers: { 'content-type': 'application/json', 'x-access-key': t.accessKey },
    payload: JSON.stringify(body),
    remoteAddress: from,
  });
}

function rest(from: string, ids: string[]) {
  return t.app.inject({ method: 'GET', url: `/tokens/anvil/${nft}/${ids.join(',')}`, headers: { 'x-access-key': t.accessKey }, remoteAddress: from });
}

function expectTrue(tokens: WireToken[], ids: string[]) {
  expect(tokens.map((x) => x.tokenId)).toEqual(ids);
  for (const x of tokens) {
    expect(x.status).toBe('AVAILABLE');
    expect({ name: x.name, description: x.description, attributes: (x as unknown as { attributes: unknown }).attributes }).toEqual(truth.get(x.tokenId));
  }
}

beforeAll(async () => {
  [chain, origin] = await Promise.all([
    startTokenChain(),
    startRawServer((_req, res, url) => {
      // `{id}` is expanded as 64 hex digits (ERC-1155's spelling).
      const id = BigInt(`0x${url.pathname.split('/').pop()!.replace('.json', '')}`).toString();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document(id)));
    }),
  ]);
  [nft] = await chain.deploy([{ contract: 'TestURI1155' }]);
  nft = nft.toLowerCase() as Address;
  await chain.send([{ address: nft, contract: 'TestURI1155', functionName: 'setURI', args: [`${origin.url}/t/{id}.json`] }]);
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false }],
    media: { enabled: false },
    // A long hot-cache TTL: a settled answer stays reusable for the whole test.
    metadata: { hotCacheTtlMs: 600_000, readShares: { keyUnitsPerSec: 0.01 } },
  });
  // Resolved first (outside any share): the steady state of a served collection.
  const client = t.services.chains.get(chain.anvil.chainId)!;
  await t.services.tokens.getTokens(client, nft, IDS, { waitMs: 60_000 });
  const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
  for (const id of IDS) {
    const uri = await pub.readContract({ address: nft, abi, functionName: 'uri', args: [BigInt(id)] });
    const res = await fetch(uri.replace('{id}', BigInt(id).toString(16).padStart(64, '0')));
    const doc = (await res.json()) as { name: string; description: string; attributes: unknown };
    truth.set(id, { name: doc.name, description: doc.description, attributes: doc.attributes });
  }
}, 120_000);

afterAll(async () => {
  await t?.close();
  await Promise.all([chain?.stop(), origin?.stop()]);
});

describe('the weights', () => {
  const o = parseConfig({}).metadata.readShares;
  const scope = { chains: 3 };
  it('charge what a read asks for: rows by the unit, a text search at least its floor, cross-chain lookups per chain', () => {
    expect(o).toMatchObject({ rowsPerUnit: 25, keyUnitsPerSec: 1_000, keyBurst: 2_000, clientFraction: 0.1, clientConcurrency: 40, clientQueue: 8 });
    const ids = (n: number) => Array.from({ length: n }, (_, i) => String(i));
    expect(readCost('GetTokenMetadata', { tokenIDs: ids(1) }, o, scope)).toBe(1);
    expect(readCost('GetTokenMetadata', { tokenIDs: ids(100) }, o, scope)).toBe(4);
    expect(readCost('GetTokenMetadataBatch', { contractTokenMap: Object.fromEntries(ids(50).map((k) => [k, ids(50)])) }, o, scope)).toBe(100);
    expect(readCost('GetContractInfoBatch', { contractAddresses: ids(100) }, o, scope)).toBe(4);
    expect(readCost('FindContractInfoBatch', { contractAddresses: ids(100) }, o, scope)).toBe(12);
    expect(readCost('SearchTokens', { page: { pageSize: 1000 } }, o, scope)).toBe(40);
    expect(readCost('SearchTokens', { page: { pageSize: 20 } }, o, scope)).toBe(10);
    expect(readCost('SearchTokenMetadata', { filter: { text: null, properties: [] }, page: { pageSize: 100 } }, o, scope)).toBe(4);
    expect(readCost('SearchTokenMetadata', { filter: { text: 'dragon', properties: [] }, page: { pageSize: 100 } }, o, scope)).toBe(10);
    expect(readCost('GetTokenMetadataPropertyFilters', {}, o, scope)).toBe(20);
    expect(readCost('SearchContracts', {}, o, scope)).toBe(1);
    expect(readCost('Ping', {}, o, scope)).toBeUndefined();
    expect(readCost('RefreshTokenMetadata', {}, o, scope)).toBeUndefined();
  });
});

describe('a key read by many clients', () => {
  it('one client sending the largest batches at once spends its own share; a second client of the key reads every token right, none refused', async () => {
    // The attacker: 30 batches of 50 × 50 ids (100 units each) at once, from two addresses of one /24;
    // its share (10 % of the key's burst of 2 000: 200 units) pays for two. Bodies differ, so none is a repeat.
    const keys = spellings(nft, 50);
    const batch = (k: number) => ({ chainID: 'anvil', contractTokenMap: Object.fromEntries(keys.map((a, i) => [a, rotated(k + i).slice(0, 50)])) });
    const attacks = Array.from({ length: 30 }, (_, k) => post(`10.66.1.${1 + (k % 2)}`, 'GetTokenMetadataBatch', batch(k)));
    // The victim meanwhile, from another /24: token reads over RPC (single and batch) and REST.
    const asked = Array.from({ length: 12 }, (_, k) => rotated(k * 7).slice(0, 10));
    const ordinary = asked.map((ids, k) =>
      k % 3 === 0
        ? post('10.1.2.3', 'GetTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: ids })
        : k % 3 === 1
          ? post('10.1.2.3', 'GetTokenMetadataBatch', { chainID: 'anvil', contractTokenMap: { [nft]: ids } })
          : rest('10.1.2.3', ids),
    );
    const [attacked, victim] = await Promise.all([Promise.all(attacks), Promise.all(ordinary)]);

    victim.forEach((r, k) => {
      expect(r.statusCode, r.body).toBe(200);
      const body = r.json();
      expectTrue(k % 3 === 0 ? body.tokenMetadata : k % 3 === 1 ? body.contractTokenMetadata[nft] : body, asked[k]);
    });
    const done = attacked.filter((r) => r.statusCode === 200);
    const refused = attacked.filter((r) => r.statusCode === 429);
    expect(done).toHaveLength(2);
    expect(refused).toHaveLength(28);
    for (const r of done) expect(r.json().contractTokenMetadata[nft]).toHaveLength(2_500);
    for (const r of refused) {
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      expect(r.json()).toMatchObject({ error: 'RateLimited', code: 2005, status: 429 });
      expect(r.json().cause).toMatch(/^clientRate: /);
    }

    // Another address of the attacker's /24 is the same client, even for one token; the victim's next read is answered.
    const again = await post('10.66.1.200', 'GetTokenMetadata', { chainID: 'anvil', contractAddress: nft, tokenIDs: ['1'] });
    expect(again.statusCode).toBe(429);
    expect(again.json().cause).toMatch(/^clientRate: /);
    const next = await rest('10.1.2.3', ['1', '2']);
    expect(next.statusCode).toBe(200);
    expectTrue(next.json(), ['1', '2']);
    // A client that has not spent its share is answered its largest read (charged at most its burst).
    const fresh = await post('10.5.5.5', 'GetTokenMetadataBatch', batch(99));
    expect(fresh.statusCode, fresh.body).toBe(200);
    expect(fresh.json().contractTokenMetadata[nft]).toHaveLength(2_500);
  });

  it('charges a REST read by its ids: 100 ids cost 4 units, so a share of 200 pays for 50; a repeat from the response cache costs nothing', async () => {
    const from = '10.77.1.1';
    const statuses: number[] = [];
    for (let k = 0; k < 50; k++) statuses.push((await rest(from, rotated(k))).statusCode);
    expect(statuses).toEqual(Array(50).fill(200));
    const over = await rest(from, [...IDS].reverse());
    expect(over.statusCode).toBe(429);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expect(over.json().cause).toMatch(/^clientRate: .*this call costs 4\)/);
    // The first read again: a settled answer given from the response cache, before any share is charged.
    const repeat = await rest(from, rotated(0));
    expect(repeat.statusCode).toBe(200);
    expectTrue(repeat.json(), rotated(0));

    const metrics = await scrape(t.app);
    expect(metrics).toMatch(/metarelay_metadata_reads_refused_total\{share="clientRate"\} 30/);
    expect(metrics).toMatch(/metarelay_metadata_read_share_limit\{limit="clientBurst"\} 200/);
    expect(metrics).toMatch(/metarelay_metadata_read_share_limit\{limit="rowsPerUnit"\} 25/);
  });
});
