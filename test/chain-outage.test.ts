// A chain whose node cannot be reached, behind a real proxy in front of anvil: calls that need the
// node answer 503 with Retry-After naming the chain (never 500), the outage is logged once with its
// cause, and a provider's 429 is retryable the same way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { sponsor, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, mintBundles, sendVia, type LoadItem } from './support/relay-load.ts';
import { TEST_DB } from './support/env.ts';

let env: RelayerEnv;
let item: LoadItem;
const lines: { msg: string; chain?: string; cause?: string }[] = [];

beforeAll(async () => {
  const log = pino({ level: 'info' }, { write: (l: string) => void lines.push(JSON.parse(l)) });
  env = await startRelayerEnv({ proxy: true, rpcTimeoutMs: 1_000, log });
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
      const ready = await env.app.inject({ method: 'GET', url: `/ready?chain=${chainName()}` });
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
      const ready = await env.app.inject({ method: 'GET', url: '/ready' });
      expect(ready.statusCode).toBe(200);
      expect(ready.json().chains[0]).toMatchObject({ ok: false, rateLimited: true });
    } finally {
      limit();
    }
  });
});
