// Fair shares of a key's indexer reads (issue 54, finding 7): a publishable key ships in apps, so one
// client of it asks for many heavy pages (1 000 rows with metadata) at once while a second client of
// the same key reads as usual. Judged by counts, never latency: the second client's answers complete
// (every balance the chain holds) and none refused; the attacker's beyond its share refused 429 with
// Retry-After and the share's name, and only as many of its reads done as its share pays for.
import { parseAbi, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devPublicClient } from '../src/devchain/index.ts';
import { scrape, startTestService, type TestService } from './support/service.ts';
import { startTokenChain, type TokenChain } from './support/token-chain.ts';
import { catchUp } from './support/catch-up.ts';

const abi = parseAbi(['function balanceOf(address, uint256) view returns (uint256)']);
const IDS = Array.from({ length: 30 }, (_, i) => BigInt(i + 1));
const H = privateKeyToAccount(generatePrivateKey()).address.toLowerCase() as Address;

let chain: TokenChain;
let t: TestService;
let multi: Address;

/** GetTokenBalances from one client address (fastify's inject sets the socket's address). */
function read(from: string, body: Record<string, unknown>, key = t.accessKey) {
  return t.app.inject({
    method: 'POST',
    url: '/indexer/anvil/rpc/Indexer/GetTokenBalances',
    headers: { 'content-type': 'application/json', 'x-access-key': key },
    payload: JSON.stringify({ accountAddress: H, includeCollectionTokens: true, ...body }),
    remoteAddress: from,
  });
}

beforeAll(async () => {
  chain = await startTokenChain();
  [multi] = (await chain.deploy([{ contract: 'TestIndexERC1155', args: ['http://127.0.0.1:1/{id}.json'] }])) as Address[];
  multi = multi.toLowerCase() as Address;
  await chain.send([{ address: multi, contract: 'TestIndexERC1155', functionName: 'mintBatch', args: [H, IDS, IDS.map((i) => i * 3n)] }]);
  t = await startTestService({
    chains: [{ ...chain.chainConfig, watch: false, indexer: { scope: 'all', fromBlock: 0, confirmations: 0, chunkBlocks: 50, pollMs: 50 } }],
    media: { enabled: false },
    // A heavy read (1 000 rows with metadata) costs 20 × 2 = 40 units. The key's bucket holds 1 000 and
    // each client network 10 % of it (100): two heavy reads, then nothing (the refill, 0.001 units/s
    // for a client, is nothing over the test's length). One heavy read runs at a time, 4 may wait.
    indexer: { readShares: { keyUnitsPerSec: 0.01, keyBurst: 1_000, clientFraction: 0.1, clientConcurrency: 40, clientQueue: 4 } },
  });
  await catchUp(t.services.indexers.get(chain.anvil.chainId)!);
}, 120_000);

afterAll(async () => {
  await t?.close();
  await chain?.stop();
});

describe('a key read by many clients', () => {
  it('one client asking for many heavy pages at once spends its own share; a second client of the key reads every balance, none refused', async () => {
    const pub = devPublicClient(chain.anvil.rpcUrl, chain.anvil.chainId);
    const truth = new Map(await Promise.all(IDS.map(async (id) => [String(id), String(await pub.readContract({ address: multi, abi, functionName: 'balanceOf', args: [H, id] }))] as const)));

    // The attacker: 30 heavy reads at once from one /24 (two addresses in it), the victim's 12 ordinary reads meanwhile from another.
    const heavy = { includeMetadata: true, page: { pageSize: 1000 } };
    const attacks = Array.from({ length: 30 }, (_, i) => read(`10.66.1.${1 + (i % 2)}`, heavy));
    const ordinary = Array.from({ length: 12 }, () => read('10.1.2.3', { contractAddress: multi, page: { pageSize: 50 } }));
    const [attacked, victim] = await Promise.all([Promise.all(attacks), Promise.all(ordinary)]);

    for (const r of victim) {
      expect(r.statusCode, r.body).toBe(200);
      const rows = (r.json().balances as { tokenID: string; balance: string }[]).map((b) => [b.tokenID, b.balance] as const);
      expect(new Map(rows)).toEqual(truth);
    }
    const done = attacked.filter((r) => r.statusCode === 200);
    const refused = attacked.filter((r) => r.statusCode === 429);
    // Its share paid for two heavy reads; the other 28 were refused, none failed otherwise.
    expect(done).toHaveLength(2);
    expect(refused).toHaveLength(28);
    for (const r of done) expect(r.json().balances).toHaveLength(IDS.length);
    for (const r of refused) {
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
      expect(r.json()).toMatchObject({ code: 1007, status: 429 });
      expect(r.json().cause).toMatch(/^clientRate: /);
    }

    // Another address of the attacker's /24 is the same client (20 units left: a heavy read does not fit); the victim's next read is still answered.
    expect((await read('10.66.1.200', heavy)).statusCode).toBe(429);
    expect((await read('10.1.2.3', { contractAddress: multi })).statusCode).toBe(200);
    const metrics = await scrape(t.app);
    expect(metrics).toMatch(/metarelay_indexer_reads_refused_total\{share="clientRate"\} 29/);
    expect(metrics).toMatch(/metarelay_indexer_read_share_limit\{limit="clientConcurrency"\} 40/);
  });
});
