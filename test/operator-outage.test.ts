// A chain outage as an operator meets it, on a real `metarelay serve` process (the build the package
// ships) with two chains: one behind a real proxy that drops every connection for a while, one healthy.
// - /ready stays 200 while the database answers, with each chain's state in its body; /ready?chain=
//   answers for one chain (503 for the one down, 200 for the other);
// - relayer intake and a metadata read that needs the node answer 503 with Retry-After and a webrpc error
//   naming the chain, never 500;
// - the outage is logged once when it begins (with its cause) and once when it ends, not per request,
//   and no stack trace is logged;
// - /ready's body and the console's Health keep the last head, the queue, the senders, down since and the cause;
// - and, while it is up, an unknown meta-transaction is 404 NotFound and "chainId" for "chainID" is named.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createPublicClient, http, type Address } from 'viem';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnvil, type AnvilHandle } from '../src/devchain/anvil.ts';
import { startCli, type LongRunning } from './support/cli.ts';
import { TEST_DB } from './support/env.ts';
import { freePort } from './support/ports.ts';
import { deployWallets, mintBundles, waitFor, type LoadItem } from './support/relay-load.ts';
import { PAYEE, QUOTE_SECRET, SENDER_KEYS, type RelayerEnv } from './support/relayer-env.ts';
import { startRpcProxy, type RpcProxy } from './support/rpc-proxy.ts';
import { startSponsoredChain, type SponsoredChain } from './support/sponsored-chain.ts';

const ADMIN = 'outage-admin-token-0123456789';
let sc: SponsoredChain;
let other: AnvilHandle;
let proxy: RpcProxy;
let items: LoadItem[];
let srv: LongRunning;
let base: string;
const dir = mkdtempSync(join(tmpdir(), 'metarelay-outage-'));

beforeAll(async () => {
  sc = await startSponsoredChain('outage');
  other = await startAnvil({ chainId: 31338, blockTime: null });
  proxy = await startRpcProxy(sc.chain.anvil.rpcUrl);
  const pub = createPublicClient({ transport: http(sc.chain.anvil.rpcUrl), cacheTime: 0 });
  const env = { rpcUrl: sc.chain.anvil.rpcUrl, public: pub, chainId: sc.chain.chainConfig.chainId, token: sc.token, services: { db: sc.testDb.db } } as unknown as RelayerEnv;
  items = await mintBundles(env, await deployWallets(env, 2), 1);
  if (TEST_DB === 'pglite') await sc.testDb.db.close();
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const cfg = join(dir, 'metarelay.json');
  writeFileSync(
    cfg,
    JSON.stringify({
      port,
      database: sc.testDb.location,
      allowPrivateNetworks: true,
      logLevel: 'info',
      admin: { tokens: [ADMIN] },
      relayer: { quoteSecret: QUOTE_SECRET },
      chains: [
        {
          ...sc.chain.chainConfig,
          rpcUrls: [proxy.url],
          rpcTimeoutMs: 1_000,
          watch: false,
          relayer: { senderKeys: SENDER_KEYS, paymentAddress: PAYEE, feeTokens: [{ address: sc.token, name: 'Fee USD', symbol: 'FUSD', decimals: 6, nativePrice: '0.0004' }], pollMs: 50 },
        },
        { chainId: 31338, name: 'other', rpcUrls: [other.rpcUrl], watch: false },
      ],
    }),
  );
  srv = startCli(['serve', '--config', cfg]);
  await waitFor('serve ready', async () => (await fetch(`${base}/ready`).catch(() => undefined))?.status === 200, 90_000);
}, 300_000);

afterAll(async () => {
  await srv?.stop('SIGKILL');
  await proxy?.close();
  await other?.stop();
  await sc?.testDb.drop().catch(() => undefined);
  await sc?.chain.stop();
  rmSync(dir, { recursive: true, force: true });
});

const name = () => sc.chain.chainConfig.name;
const chainId = () => sc.chain.chainConfig.chainId;
const post = async (path: string, body: unknown, headers: Record<string, string>) => {
  const r = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return { status: r.status, retryAfter: r.headers.get('retry-after'), body: (await r.json()) as any };
};
const send = (item: LoadItem) =>
  post(
    `/relayer/${name()}/rpc/Relayer/SendMetaTxn`,
    { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } },
    { 'x-access-key': sc.accessKey },
  );
const ready = async (query = '') => {
  // The full body is the operator's: an admin token.
  const r = await fetch(`${base}/ready${query}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  return { status: r.status, body: (await r.json()) as any };
};
/** The server's JSON log lines so far. */
const logLines = () =>
  srv
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; chain?: string; cause?: string; err?: unknown });

function expectUnavailable(r: { status: number; retryAfter: string | null; body: any }, code: string) {
  expect(r.status, JSON.stringify(r.body)).toBe(503);
  expect(Number(r.retryAfter)).toBeGreaterThan(0);
  expect(r.body.error).toBe(code);
  expect(r.body.cause).toContain(`chain ${name()} (${chainId()})`);
  expect(r.body.cause).toMatch(/cannot be reached/);
}

describe(`a chain down under a running serve process (${TEST_DB})`, () => {
  it('answers 503 naming the chain, stays ready for the other, keeps health, logs the outage once, and recovers', async () => {
    // Up: the relayer's sweep has read each sender from the node (balance, when).
    const up = await waitFor('each sender read', async () => {
      const c = (await ready()).body.chains.find((x: { name: string }) => x.name === name());
      return c?.relayer?.senders.every((x: { balanceAt: string | null }) => x.balanceAt) ? c : undefined;
    });
    expect(up).toMatchObject({ ok: true, head: expect.any(Number), downSince: null });
    // While it is up, two of the smaller answers: a meta-transaction this relayer never saw is 404
    // NotFound (not 400), and "chainId" for "chainID" is named in the error.
    const missing = await post(`/relayer/${name()}/rpc/Relayer/GetMetaTxnStatus`, { metaTxID: `0x${'ee'.repeat(32)}` }, { 'x-access-key': sc.accessKey });
    expect([missing.status, missing.body.error]).toEqual([404, 'NotFound']);
    const spelled = await post('/rpc/Metadata/GetContractInfo', { chainId: name(), contractAddress: sc.token }, { 'x-access-key': sc.accessKey });
    expect(spelled.status).toBe(400);
    expect(spelled.body.cause).toContain('(the body has "chainId": field names are case-sensitive, send "chainID")');
    const linesBefore = logLines().length;

    const drop = proxy.addRule(() => ({ kind: 'drop' }));
    let downSince: string;
    try {
      // Intake, five times: each a retryable 503 naming the chain, none a 500.
      for (let i = 0; i < 5; i++) expectUnavailable(await send(items[0]), 'Unavailable');
      // A metadata read that needs the node: a token never read before.
      const unseen = '0x00000000000000000000000000000000000c0c01' as Address;
      for (let i = 0; i < 3; i++) {
        expectUnavailable(await post('/rpc/Metadata/GetContractInfo', { chainID: name(), contractAddress: unseen }, { 'x-access-key': sc.accessKey }), 'Fail');
        expectUnavailable(await post('/rpc/Metadata/GetTokenMetadata', { chainID: name(), contractAddress: unseen, tokenIDs: ['1'] }, { 'x-access-key': sc.accessKey }), 'Fail');
      }

      // Ready while the database answers; each chain's state in the body.
      const r = await ready();
      expect(r.status).toBe(200);
      expect(r.body.database).toMatchObject({ ok: true });
      const byName = Object.fromEntries(r.body.chains.map((c: { name: string }) => [c.name, c]));
      expect(byName.other).toMatchObject({ ok: true, head: expect.any(Number), downSince: null });
      const down = byName[name()];
      expect(down).toMatchObject({ ok: false, head: up.head, headAt: expect.any(String), downSince: expect.any(String), cause: expect.any(String) });
      expect(down.cause).not.toBe('HTTP request failed.');
      expect(down.relayer.queue).toMatchObject({ queued: expect.any(Number), sent: expect.any(Number) });
      expect(down.relayer.senders).toHaveLength(SENDER_KEYS.length);
      for (const [i, s] of down.relayer.senders.entries()) expect(s).toMatchObject({ address: up.relayer.senders[i].address, balance: up.relayer.senders[i].balance, balanceAt: expect.any(String) });
      downSince = down.downSince;
      // Per chain: the one down is 503, the other 200, an unknown one 404.
      const one = await ready(`?chain=${name()}`);
      expect(one.status).toBe(503);
      expect(one.body.chains).toEqual([expect.objectContaining({ name: name(), ok: false })]);
      expect((await ready('?chain=other')).status).toBe(200);
      expect((await ready('?chain=nope')).status).toBe(404);

      // The console's Health: the same state, for a person.
      const h = await post('/rpc/Console/Health', {}, { authorization: `Bearer ${ADMIN}` });
      expect(h.status, JSON.stringify(h.body)).toBe(200);
      const n = h.body.networks.find((x: { network: string }) => x.network === name());
      expect(n).toMatchObject({ ok: false, downSince, error: down.cause, head: { number: up.head, seenAt: expect.any(String) } });
      expect(n.relayer.queue).toMatchObject({ queued: expect.any(Number) });
      for (const s of n.relayer.senders) expect(s).toMatchObject({ live: false, readAt: expect.any(String), etherBalance: expect.any(Number) });

      // A few seconds of the process's own pollers (dispatcher, sweep, /ready) against the dead node.
      await new Promise((r) => setTimeout(r, 3_000));
    } finally {
      drop();
    }
    // Back: the next send is accepted.
    const ok = await waitFor('a send accepted again', async () => {
      const r = await send(items[0]);
      return r.status === 200 ? r : undefined;
    });
    expect(ok.body.status).toBe(true);
    await waitFor('the recovery logged', async () => logLines().some((l) => l.msg === 'chain node reachable again'));

    const during = logLines().slice(linesBefore);
    const outages = during.filter((l) => l.msg === 'chain node unreachable');
    expect(outages).toHaveLength(1);
    expect(outages[0]).toMatchObject({ chain: name(), cause: expect.any(String) });
    expect(during.filter((l) => l.msg === 'chain node reachable again')).toHaveLength(1);
    const warnings = during.filter((l) => l.level >= 40);
    console.log(`an outage of ~4 s under serve (${TEST_DB}): ${during.length} log lines, ${warnings.length} at warn or above: ${[...new Set(warnings.map((l) => l.msg))].join(' | ')}`);
    // No stack traces, no unhandled errors: the outage is one line, not one per request or per poll.
    expect(during.filter((l) => l.msg === 'unhandled error in rpc method' || (l.err as { stack?: string } | undefined)?.stack).map((l) => l.msg)).toEqual([]);
    // The one warning is the outage itself: the pollers that met it and the requests refused add none.
    expect(warnings.map((l) => l.msg)).toEqual(['chain node unreachable']);
    expect(srv.child.exitCode).toBeNull();
    expect(await srv.stop('SIGTERM')).toBe(0);
  });
});
