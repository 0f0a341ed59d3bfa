// What a chain outage looks like from the reading side, behind a real proxy in front of anvil that
// drops every connection:
// - /ready's body and the console's Health keep the last known head (and when it was seen), the
//   relayer's queue and each sender's last read balance and pending transactions, with when the outage
//   began and its cause;
// - metadata and indexer calls that need the node (an uncached token or contract, a balance the indexer
//   reads from the chain) answer 503 with Retry-After and a webrpc error naming the chain, never 500,
//   and answer normally once the node is back.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { waitFor } from './support/relay-load.ts';
import { queueRow } from './support/meta-rows.ts';
import { rpc, asOperator } from './support/service.ts';
import { TEST_DB } from './support/env.ts';

let env: RelayerEnv;

beforeAll(async () => {
  env = await startRelayerEnv({ proxy: true, rpcTimeoutMs: 1_000, indexer: { scope: 'watchlist', contracts: [], confirmations: 0, pollMs: 200 } });
}, 120_000);

afterAll(async () => {
  await env?.close();
});

const chainName = () => env.services.chains.get(env.chainId)!.name;
const key = () => ({ 'x-access-key': env.accessKey });
const admin = () => ({ authorization: `Bearer ${env.adminToken}` });
const readyBody = async () => (await env.app.inject({ method: 'GET', url: '/ready', headers: asOperator })).json();

function expectUnavailable(r: { status: number; headers: Record<string, unknown>; body: any }, code: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(503);
  expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  expect(r.body.error).toBe(code);
  expect(r.body.cause).toContain(`chain ${chainName()} (${env.chainId})`);
  expect(r.body.cause).toMatch(/cannot be reached/);
}

/** Drops every connection to the node while `fn` runs. */
async function whileDown<T>(fn: () => Promise<T>): Promise<T> {
  const drop = env.proxy!.addRule(() => ({ kind: 'drop' }));
  try {
    return await fn();
  } finally {
    drop();
  }
}

describe(`health while a chain is down (${TEST_DB})`, () => {
  it('keeps the last head, queue and senders in /ready and the console Health, with down since and the cause', async () => {
    // Up: the sweep has read each sender from the node (its balance, with when), and /ready saw the head.
    const before = await waitFor('each sender read by the sweep', async () => {
      const b = await readyBody();
      return b.chains[0].relayer?.senders.every((x: { balanceAt: string | null }) => x.balanceAt) ? b : undefined;
    });
    const up = before.chains[0];
    expect(up).toMatchObject({ ok: true, head: expect.any(Number), downSince: null });
    const upHealth = await rpc(env.app, '/rpc/Console/Health', {}, admin());
    expect(upHealth.status).toBe(200);
    expect(upHealth.body.networks[0]).toMatchObject({ ok: true, error: null, head: { number: expect.any(Number), hash: expect.any(String) } });
    expect(upHealth.body.networks[0].relayer.senders[0]).toMatchObject({ live: true, etherBalance: expect.any(Number) });

    await whileDown(async () => {
      // Queued while down: the depth is the database's, not the node's.
      await queueRow(env.services.metaTxns, env.chainId, { id: 'a0a1'.padEnd(64, '0'), wallet: '0x00000000000000000000000000000000000a0a11', nonce: 1n });
      const ready = await env.app.inject({ method: 'GET', url: '/ready', headers: asOperator });
      expect(ready.statusCode).toBe(200);
      const down = ready.json().chains[0];
      expect(down).toMatchObject({ name: chainName(), ok: false, head: up.head, headAt: expect.any(String), downSince: expect.any(String), cause: expect.any(String) });
      // The head was seen before the outage began (by /ready's probe or the console's read).
      expect(Date.parse(down.headAt)).toBeLessThanOrEqual(Date.parse(down.downSince));
      expect(down.cause).not.toBe('HTTP request failed.');
      expect(down.relayer.queue.queued).toBeGreaterThanOrEqual(1);
      expect(down.relayer.senders).toHaveLength(up.relayer.senders.length);
      for (const [i, s] of down.relayer.senders.entries()) {
        expect(s).toMatchObject({ address: up.relayer.senders[i].address, balance: up.relayer.senders[i].balance, pending: expect.any(Number) });
        expect(Number(s.balance)).toBeGreaterThan(0);
        expect(s.balanceAt).toEqual(expect.any(String));
      }

      const h = await rpc(env.app, '/rpc/Console/Health', {}, admin());
      expect(h.status, JSON.stringify(h.body)).toBe(200);
      const n = h.body.networks[0];
      expect(n).toMatchObject({ ok: false, downSince: down.downSince, error: down.cause, head: { number: up.head, seenAt: expect.any(String) } });
      expect(n.relayer.queue.queued).toBeGreaterThanOrEqual(1);
      for (const s of n.relayer.senders) {
        expect(s).toMatchObject({ live: false, readAt: expect.any(String), etherBalance: expect.any(Number), inFlight: expect.any(Number) });
        expect(s.etherBalance).toBeGreaterThan(0);
      }
    });
  });
});

describe(`operational detail behind a credential (${TEST_DB})`, () => {
  it('anonymous /ready says ready and no more (a chain down too), keyless RuntimeStatus has no senders, balances or queue, /metrics needs an admin token', async () => {
    const status = (headers: Record<string, string> = {}) => rpc(env.app, `/relayer/${chainName()}/rpc/Relayer/RuntimeStatus`, {}, headers);
    const senders = (await status(key())).body.status.senders.map((s: { address: string }) => s.address.toLowerCase());
    expect(senders.length).toBeGreaterThan(0);
    const keyless = await status();
    expect(keyless.status, JSON.stringify(keyless.body)).toBe(200);
    expect(keyless.body.status).toMatchObject({ healthOK: true, chainID: env.chainId });
    for (const hidden of ['senders', 'queue', 'waiting', 'prices', 'unpaid', 'refills']) expect(keyless.body.status).not.toHaveProperty(hidden);
    const text = JSON.stringify(keyless.body).toLowerCase();
    for (const a of senders) expect(text).not.toContain(a);

    const node = new URL(env.services.config.chains[0]!.rpcUrls[0]!).host;
    await whileDown(async () => {
      // The probe finds the node down (the full body has its cause) before the anonymous answers are read.
      await waitFor('the chain seen down', async () => ((await readyBody()).chains[0].ok === false ? true : undefined));
      const anon = await env.app.inject({ method: 'GET', url: '/ready' });
      expect(anon.statusCode).toBe(200);
      expect(anon.json()).toEqual({ ready: true });
      expect(anon.body).not.toContain(node);
      const one = await env.app.inject({ method: 'GET', url: `/ready?chain=${chainName()}` });
      expect(one.statusCode).toBe(503);
      expect(one.json()).toEqual({ ready: false });
    });
    const metrics = await env.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.statusCode).toBe(401);
    expect(metrics.body).not.toContain('metarelay_');
    expect((await env.app.inject({ method: 'GET', url: '/metrics', headers: admin() })).body).toContain('metarelay_relayer');
  });
});

describe(`metadata and indexer calls that need a node that is down (${TEST_DB})`, () => {
  const tokenMetadata = () => rpc(env.app, '/rpc/Metadata/GetTokenMetadata', { chainID: chainName(), contractAddress: env.token, tokenIDs: ['1'] }, key());
  const contractInfo = () => rpc(env.app, '/rpc/Metadata/GetContractInfo', { chainID: chainName(), contractAddress: env.token }, key());
  const indexer = (method: string, body: unknown) => rpc(env.app, `/indexer/${chainName()}/rpc/Indexer/${method}`, body, key());
  const someone = '0x00000000000000000000000000000000000b0b01';

  it('answers 503 with Retry-After naming the chain, never 500, and answers once the node is back', async () => {
    await whileDown(async () => {
      expectUnavailable(await tokenMetadata(), 'Fail');
      expectUnavailable(await contractInfo(), 'Fail');
      expectUnavailable(await indexer('GetEtherBalance', { accountAddress: someone }), 'Unavailable');
      expectUnavailable(await indexer('GetNativeTokenBalance', { accountAddress: someone }), 'Unavailable');
      expectUnavailable(await indexer('FetchTransactionReceipt', { txnHash: `0x${'ab'.repeat(32)}` }), 'Unavailable');
      // Balances are the index's (the database), not the node's: they answer through the outage.
      const balances = await indexer('GetTokenBalances', { accountAddress: someone, contractAddress: env.token });
      expect(balances.status, JSON.stringify(balances.body)).toBe(200);
    });
    // Back: the same calls answer.
    for (const r of [await tokenMetadata(), await contractInfo(), await indexer('GetEtherBalance', { accountAddress: someone })]) expect(r.status, JSON.stringify(r.body)).toBe(200);
  });
});
