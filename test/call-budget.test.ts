// The node's call budget (src/chain/call-budget.ts) against a real anvil behind the provider-like proxy
// that answers 429 above N calls a second: 429s are waited out, not handed to callers; a client's call
// goes before the background's; a client's call that cannot get a slot is refused with what the API
// answers 503 + Retry-After from, well before the transport's timeout.
import { ChainHealth } from '../src/chain/health.ts';
import { describe, expect, it } from 'vitest';
import { CallBudgetError } from '../src/chain/call-budget.ts';
import { createChainClient } from '../src/chain/client.ts';
import { chainOutageOf } from '../src/chain/outage.ts';
import { anvilBehindProvider } from './support/provider-proxy.ts';

const node = anvilBehindProvider();

const client = () => createChainClient({ chainId: node.anvil.chainId, name: 'anvil', rpcUrls: [node.provider.url], rpcBatchSize: 1 }, { timeoutMs: 20_000 });
const someone = (i: number) => `0x${(i + 1).toString(16).padStart(40, '0')}` as const;

describe('a node that rate-limits', () => {
  it('the background waits for its slots and gets every answer; a client call sent last is answered before the background is done', async () => {
    node.provider.set({ rateLimit: { callsPerSec: 5, retryAfterSec: 1 } });
    try {
      const chain = client();
      const done: string[] = [];
      // Twenty background reads at once: over the limit, the node answers 429 and the rate is learnt.
      const background = Array.from({ length: 20 }, (_, i) => chain.public.getBalance({ address: someone(i) }).then(() => void done.push(`background ${i}`)));
      // Once the node has refused some, a client's read.
      while ((node.provider.hits.rateLimit ?? 0) === 0) await new Promise((r) => setTimeout(r, 20));
      const intake = chain
        .forRole('intake')
        .getBalance({ address: someone(100) })
        .then(() => void done.push('intake'));
      await Promise.all([...background, intake]);
      // Every call answered (none failed on a 429), and the client's before the background's last.
      expect(done).toHaveLength(21);
      expect(done.indexOf('intake')).toBeLessThan(done.length - 1);
    } finally {
      node.provider.set({});
    }
  }, 60_000);

  it('a client call on a node that refuses everything is refused as rate-limited, with a Retry-After, before the transport times out', async () => {
    const chain = client();
    // The rate learnt first, then a node that refuses everything.
    node.provider.set({ rateLimit: { callsPerSec: 2, retryAfterSec: 1 } });
    try {
      await Promise.all(Array.from({ length: 6 }, (_, i) => chain.public.getBalance({ address: someone(i) })));
      node.provider.set({ rateLimit: { callsPerSec: 0, retryAfterSec: 1 } });
      const err = await chain
        .forRole('intake')
        .getBalance({ address: someone(200) })
        .then(
          () => null,
          (e: unknown) => e,
        );
      // Refused by the budget's bound (a few seconds), or handed the node's 429 once it has refused
      // everything for 3 s: either way well before the 20 s timeout, and as a rate limit.
      let cause = err as { cause?: unknown; status?: unknown } | null;
      while (cause && !(cause instanceof CallBudgetError) && cause.status !== 429) cause = cause.cause as typeof cause;
      expect(cause).toBeTruthy();
      const outage = chainOutageOf(err, [chain]);
      expect(outage).toMatchObject({ chain: 'anvil', rateLimited: true });
      expect(outage!.retryAfterS).toBeGreaterThanOrEqual(1);
      expect(chain.health.state()).toMatchObject({ rateLimited: true });
    } finally {
      node.provider.set({});
    }
  }, 60_000);
});

describe("the chain's health during a rate-limited spell", () => {
  it('a call that times out while the node rate-limits us keeps the spell (callers are told to slow down); a refused connection or an answer ends it', () => {
    const h = new ChainHealth(1, 'c');
    h.failed('rate-limited by the node (HTTP 429)', { rateLimited: true, retryAfterS: 3 });
    // A request in flight meets the caller's timeout on a loaded machine: still the same spell.
    h.failed('no answer within 1000 ms');
    expect(h.state()).toMatchObject({ rateLimited: true, cause: 'rate-limited by the node (HTTP 429)' });
    // Another failure is the node's own: it says so.
    h.failed('connect ECONNREFUSED 127.0.0.1:1');
    expect(h.state()).toMatchObject({ rateLimited: false, cause: 'connect ECONNREFUSED 127.0.0.1:1' });
    h.failed('rate-limited by the node (HTTP 429)', { rateLimited: true });
    h.reached();
    h.failed('no answer within 1000 ms');
    expect(h.state()).toMatchObject({ rateLimited: false, cause: 'no answer within 1000 ms' });
  });
});
