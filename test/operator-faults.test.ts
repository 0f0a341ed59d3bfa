// What an operator meets in a fault, on one relayer service behind a real proxy in front of anvil:
// - a chain whose node cannot be reached: calls that need the node answer 503 with Retry-After naming
//   the chain (never 500), the outage is logged once with its cause, and a provider's 429 is retryable
//   the same way;
// - a drain with receipt long polls open: they are answered at once with the current status (last:
//   the drain stops this service's dispatchers).
import { asOperator } from './support/service.ts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, mintBundles, sendVia, type LoadItem } from './support/relay-load.ts';
import { TEST_DB } from './support/env.ts';
import { queueRow } from './support/meta-rows.ts';

let env: RelayerEnv;
let item: LoadItem;
const lines: { msg: string; chain?: string; cause?: string }[] = [];

beforeAll(async () => {
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  env = await startRelayerEnv({ proxy: true, rpcTimeoutMs: 1_000, log, relayer: { receiptWaitMs: 60_000 } });
  await sponsor(env, 'CONTRACT', env.token);
  const [user] = await deployWallets(env, 1);
  [item] = await mintBundles(env, [user], 1);
}, 120_000);

afterAll(async () => {
  await env?.close();
});

const key = () => ({ 'x-access-key': env.accessKey });
const chainName = () => env.services.chains.get(env.chainId)!.name;

function expectUnavailable(r: { status: number; headers: Record<string, unknown>; body: any }, what: RegExp) {
  expect(r.status, JSON.stringify(r.body)).toBe(503);
  expect(Number(r.headers['retry-after'])).toBeGreaterThan(0);
  expect(r.body.cause).toContain(`chain ${chainName()} (${env.chainId})`);
  expect(r.body.cause).toMatch(what);
}

describe(`a chain whose node is down (${TEST_DB})`, () => {
  it('answers relayer intake and FeeOptions 503 naming the chain, logs the outage once, and its recovery', async () => {
    const drop = env.proxy!.addRule(() => ({ kind: 'drop' }));
    try {
      const send = sendVia(env);
      for (let i = 0; i < 3; i++) expectUnavailable(await send(item), /cannot be reached/);
      expectUnavailable(await env.call('FeeOptions', { wallet: item.user.wallet.address, to: item.bundle.entrypoint, data: item.bundle.input }, key()), /cannot be reached/);
      expect((await env.call('SendMetaTxn', { call: { walletAddress: item.user.wallet.address, contract: item.bundle.entrypoint, input: item.bundle.input } }, key())).body.error).toBe('Unavailable');
      const ready = await env.app.inject({ method: 'GET', url: `/ready?chain=${chainName()}`, headers: asOperator });
      expect(ready.statusCode).toBe(503);
      expect(ready.json().chains[0]).toMatchObject({ ok: false, downSince: expect.any(String), cause: expect.any(String) });
    } finally {
      drop();
    }
    const down = lines.filter((l) => l.msg === 'chain node unreachable');
    expect(down).toHaveLength(1);
    expect(down[0]).toMatchObject({ chain: chainName(), cause: expect.any(String) });
    expect(lines.filter((l) => l.msg === 'unhandled error in rpc method')).toEqual([]);
    // Back: the next call succeeds and the recovery is logged.
    const ok = await sendVia(env)(item);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(lines.filter((l) => l.msg === 'chain node reachable again')).toHaveLength(1);
  });

  it('answers a provider 429 as a retryable 503 with Retry-After, not 500', async () => {
    const limit = env.proxy!.addRule(() => ({ kind: 'http', status: 429 }));
    try {
      expectUnavailable(await env.call('FeeOptions', { wallet: item.user.wallet.address, to: item.bundle.entrypoint, data: item.bundle.input }, key()), /rate-limiting us/);
      const ready = await env.app.inject({ method: 'GET', url: '/ready', headers: asOperator });
      expect(ready.statusCode).toBe(200);
      expect(ready.json().chains[0]).toMatchObject({ ok: false, rateLimited: true });
    } finally {
      limit();
    }
  });
});

describe(`drain with receipt long polls open (${TEST_DB})`, () => {
  // The bound is far below receiptWaitMs (60 s): the polls pass only if the drain answers them.
  it('answers every held GetMetaTxnReceipt at once with the current status, and holds no new one', { timeout: 20_000 }, async () => {
    const id = 'd0a1'.padEnd(64, '0');
    await queueRow(env.services.metaTxns, env.chainId, { id, wallet: '0x00000000000000000000000000000000000d0a11', nonce: 1n });
    const polls = Array.from({ length: 3 }, () => env.call('GetMetaTxnReceipt', { metaTxID: id }, key()));
    while (env.services.receiptWaiters.size < 3) await new Promise((r) => setTimeout(r, 20));
    await env.services.drain();
    for (const r of await Promise.all(polls)) {
      expect(r.status).toBe(200);
      expect(r.body.receipt.status).toBe('QUEUED');
    }
    expect(env.services.receiptWaiters.size).toBe(0);
    const late = await env.call('GetMetaTxnReceipt', { metaTxID: id }, key());
    expect(late.body.receipt.status).toBe('QUEUED');
  });
});
