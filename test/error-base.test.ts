import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createPublicClient, http } from 'viem';
import { describe, expect, it } from 'vitest';
import { CallBudgetError } from '../src/chain/call-budget.ts';
import { UnreadableBlockError } from '../src/chain/logs.ts';
import { isRateLimited } from '../src/chain/node-errors.ts';
import { ChainUnreachableError } from '../src/chain/outage.ts';
import { MetadataErrors, RelayerErrors, RpcError } from '../src/http/core/errors.ts';
import { RelayError } from '../src/relayer/errors.ts';
import { causeOf } from '../src/util/cause.ts';
import { causes, errorText, findCause, innermost, MetarelayError } from '../src/util/error.ts';
import { freePort } from './support/ports.ts';

// The error base (src/util/error.ts) and what is built on it: the one walk over an error's causes, the
// text the node's classifiers read, the errors that carry kind/retryable/docsPath, and the docs pages
// those point at. Opens no database.

/** An error wrapped `depth` times, outermost first: `e0` wraps `e1` … */
function chain(depth: number): Error {
  let e: Error | undefined;
  for (let i = depth - 1; i >= 0; i--) e = new Error(`e${i}`, e ? { cause: e } : undefined);
  return e!;
}

/** A real failed node call: viem's HttpRequestError over the fetch's TypeError over the socket's ECONNREFUSED. */
async function refusedCall(): Promise<unknown> {
  const port = await freePort();
  const client = createPublicClient({ transport: http(`http://127.0.0.1:${port}`, { retryCount: 0 }) });
  return client.getBlockNumber().then(
    () => expect.unreachable('nothing listens there'),
    (err: unknown) => err,
  );
}

describe('causes()', () => {
  it('walks outermost first, objects only, and stops at 8 (a cycle ends there)', () => {
    expect([...causes(chain(3))].map((e) => e.message)).toEqual(['e0', 'e1', 'e2']);
    expect([...causes(chain(12))]).toHaveLength(8);
    expect([...causes(chain(12), 3)]).toHaveLength(3);
    const loop = new Error('a') as Error & { cause?: unknown };
    loop.cause = loop;
    expect([...causes(loop)]).toHaveLength(8);
    const wrapsString = new Error('outer', { cause: 'a string' });
    expect([...causes(wrapsString)].map((e) => e.message)).toEqual(['outer']);
    expect([...causes('thrown string')]).toEqual([]);
    expect([...causes(undefined)]).toEqual([]);
  });

  it('findCause and innermost look down the same walk', () => {
    const e = chain(5);
    expect(findCause(e, (c) => c.message === 'e3')?.message).toBe('e3');
    expect(findCause(e, (c) => c.message === 'nope')).toBeUndefined();
    expect(innermost(e)?.message).toBe('e4');
    expect(innermost(chain(12))?.message).toBe('e7');
    expect(innermost('x')).toBeUndefined();
  });
});

describe('errorText and causeOf over a real failed node call', () => {
  it('errorText has every layer, causeOf the outer line and the socket fault', async () => {
    const err = await refusedCall();
    const text = errorText(err);
    expect(text).toMatch(/HTTP request failed/);
    expect(text).toMatch(/ECONNREFUSED/);
    expect(causeOf(err)).toMatch(/^HTTP request failed: .*ECONNREFUSED 127\.0\.0\.1:\d+$/);
    // A transport failure is neither a 429 nor a budget's refusal.
    expect(isRateLimited(err)).toBe(false);
  });

  it('errorText gives an HTTP status, and String(err) when nothing is said', () => {
    const e = Object.assign(new Error('HTTP request failed.'), { status: 429, details: 'Too Many Requests' });
    expect(errorText(e)).toBe('Too Many Requests | HTTP request failed. | HTTP 429');
    expect(errorText(new Error('a', { cause: new Error('b') }))).toBe('a | b');
    expect(errorText('thrown string')).toBe('thrown string');
    expect(errorText({})).toBe('[object Object]');
  });
});

describe('MetarelayError', () => {
  it('keeps the message and the cause, and says kind, retryable and where it is documented', () => {
    const cause = new Error('socket hang up');
    const e = new MetarelayError('the node failed', { cause, kind: 'unreachable', retryable: true, docsPath: 'production.md#when-a-chains-node-is-down' });
    expect(e.message).toBe('the node failed');
    expect(e.cause).toBe(cause);
    expect([...e.causes()].map((c) => c.message)).toEqual(['the node failed', 'socket hang up']);
    expect({ kind: e.kind, retryable: e.retryable, docsPath: e.docsPath }).toEqual({ kind: 'unreachable', retryable: true, docsPath: 'production.md#when-a-chains-node-is-down' });
    const plain = new MetarelayError('refused');
    expect({ kind: plain.kind, retryable: plain.retryable, cause: plain.cause }).toEqual({ kind: undefined, retryable: false, cause: undefined });
  });

  it('is the base of the catalog errors and the chain boundary errors, their messages and names as before', () => {
    const rpc = new RpcError(MetadataErrors.InvalidArgument, 'chainID: required');
    expect(rpc).toBeInstanceOf(MetarelayError);
    expect({ name: rpc.name, message: rpc.message, kind: rpc.kind, retryable: rpc.retryable }).toEqual({
      name: 'RpcError',
      message: 'InvalidArgument: chainID: required',
      kind: 'InvalidArgument',
      retryable: false,
    });
    expect(new RpcError(RelayerErrors.RateLimited).retryable).toBe(true);
    const relay = new RelayError('unavailable', 'try again');
    expect({ name: relay.name, kind: relay.kind, retryable: relay.retryable, base: relay instanceof MetarelayError }).toEqual({ name: 'RelayError', kind: 'unavailable', retryable: true, base: true });
    expect(new RelayError('invalidArgument', 'no').retryable).toBe(false);
    const down = new ChainUnreachableError(31337);
    expect({ name: down.name, message: down.message, retryable: down.retryable }).toEqual({ name: 'ChainUnreachableError', message: 'chain 31337: its node cannot be reached', retryable: true });
    const unread = new UnreadableBlockError(7n, Object.assign(new Error('x'), { details: 'response size exceeded' }));
    expect({ name: unread.name, message: unread.message, base: unread instanceof MetarelayError }).toEqual({
      name: 'UnreadableBlockError',
      message: 'block 7: its logs could not be read (response size exceeded)',
      base: true,
    });
    // The budget's refusal is found under any wrapping, as a rate limit.
    expect(isRateLimited(new Error('call failed', { cause: new CallBudgetError(1, 3, 'no slot') }))).toBe(true);
  });
});

/** The GitHub anchor of a markdown heading. */
const slug = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s-]/gu, '')
    .replace(/\s/g, '-');

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => {
    const p = join(dir, n);
    return statSync(p).isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

describe('docsPath', () => {
  it("every error's docsPath names a page under docs/ and a heading on it", () => {
    const paths = new Set<string>();
    for (const f of sources('src')) for (const m of readFileSync(f, 'utf8').matchAll(/docsPath: '([^']+)'/g)) paths.add(m[1]!);
    expect(paths.size).toBeGreaterThanOrEqual(5);
    const missing = [...paths].filter((p) => {
      const [page, anchor] = p.split('#');
      let text: string;
      try {
        text = readFileSync(join('docs', page!), 'utf8');
      } catch {
        return true;
      }
      return anchor !== undefined && !text.split('\n').some((l) => /^#{1,6} /.test(l) && slug(l.replace(/^#+ /, '')) === anchor);
    });
    expect(missing).toEqual([]);
  });
});
