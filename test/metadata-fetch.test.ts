import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedLookup } from '../src/untrusted/address-guard.ts';
import { createFetcher, type FetchResult, type Fetcher, type FetcherOptions } from '../src/metadata/fetch/fetch.ts';
import { MAX_DOCUMENT_DEPTH } from '../src/metadata/tokens/document.ts';
import { normalizeTokenDocument } from '../src/metadata/tokens/normalize.ts';

const CID0 = 'QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG';
const CID1 = 'bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi';
const TXID = 'bNbA3TEQVL60xlgCcqdz4ZPHFZ711cZ3hmkpGttDt_U';
const MB = 1024 * 1024;

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, url: URL) => void;
type TestServer = { origin: string; port: number; close(): Promise<void> };

async function startServer(handler: Handler): Promise<TestServer> {
  const server = http.createServer((req, res) => handler(req, res, new URL(req.url ?? '/', 'http://test')));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function sendJson(res: http.ServerResponse, body: unknown, contentType = 'application/json', status = 200): void {
  res.writeHead(status, { 'content-type': contentType });
  res.end(typeof body === 'string' ? body : JSON.stringify(body));
}

function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const b64 = (text: string): string => Buffer.from(text, 'utf8').toString('base64');

function expectOk(result: FetchResult): Extract<FetchResult, { ok: true }> {
  if (!result.ok) throw new Error(`expected success, got ${result.reason}: ${result.message}`);
  return result;
}

function expectFailure(result: FetchResult): Extract<FetchResult, { ok: false }> {
  if (result.ok) throw new Error(`expected failure, got document from ${result.finalUrl}`);
  return result;
}

// ---------------------------------------------------------------------------

const bigBody = { written: 0, closed: deferred<number>() };
const JSON_DOC = { name: 'Plain', description: 'served over http' };
const bomb = zlib.gzipSync(Buffer.alloc(20 * MB, 0x20), { level: 1 });
const brBomb = zlib.brotliCompressSync(Buffer.alloc(20 * MB, 0x20), {
  params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 1 },
});

const routes: Record<string, Handler> = {
  '/doc.json': (_req, res) => sendJson(res, JSON_DOC),
  '/text.json': (_req, res) => sendJson(res, { name: 'as text' }, 'text/plain; charset=utf-8'),
  '/octet': (_req, res) => sendJson(res, { name: 'as octets' }, 'application/octet-stream'),
  '/json-as-html': (_req, res) => sendJson(res, { name: 'mislabelled' }, 'text/html'),
  '/html': (_req, res) => sendJson(res, '<!doctype html><html><body>Rate limited</body></html>', 'text/html'),
  '/html-as-json': (_req, res) => sendJson(res, '<html>oops</html>', 'application/json'),
  '/array': (_req, res) => sendJson(res, [1, 2, 3]),
  '/utf16': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{"name":"wide"}', 'utf16le')]));
  },
  '/404': (_req, res) => sendJson(res, { error: 'nope' }, 'application/json', 404),
  '/500': (_req, res) => sendJson(res, { error: 'boom' }, 'application/json', 500),
  '/429': (_req, res) => {
    res.writeHead(429, { 'retry-after': '7' });
    res.end();
  },
  '/chain': (_req, res, url) => {
    const left = Number(url.searchParams.get('n'));
    res.writeHead(302, { location: left > 1 ? `/chain?n=${left - 1}` : '/doc.json' });
    res.end();
  },
  '/loop': (_req, res) => {
    res.writeHead(301, { location: '/loop' });
    res.end();
  },
  '/redirect': (_req, res, url) => {
    res.writeHead(307, { location: url.searchParams.get('to') ?? '/' });
    res.end();
  },
  '/big': (_req, res) => {
    // Streams 50 MB with backpressure so the test can observe when the client hangs up.
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"name":"');
    res.on('close', () => bigBody.closed.resolve(bigBody.written));
    const pump = (): void => {
      while (bigBody.written < 50 * MB && !res.destroyed) {
        bigBody.written += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  },
  '/declared-big': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(50 * MB) });
    res.write('{');
  },
  '/gzip-bomb': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(bomb);
  },
  '/br-bomb': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'br' });
    res.end(brBomb);
  },
  '/encoded': (_req, res, url) => {
    const encoding = url.searchParams.get('e')!;
    const body = Buffer.from(JSON.stringify({ name: `encoded ${encoding}` }));
    const encoded = encoding === 'gzip' ? zlib.gzipSync(body) : encoding === 'br' ? zlib.brotliCompressSync(body) : encoding === 'deflate' ? zlib.deflateSync(body) : zlib.deflateRawSync(body);
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': encoding === 'raw' ? 'deflate' : encoding });
    res.end(encoded);
  },
  '/bad-gzip': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    res.end(Buffer.from('definitely not gzip'));
  },
  '/hang': () => {
    // Never answers; the client's deadline must fire.
  },
  '/stall-body': (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write('{"name":');
  },
  '/token/10.json': (_req, res) => sendJson(res, { name: 'decimal id' }),
};

let web: TestServer;
let ipfsGateway: TestServer;
let arweave: TestServer;
let fetcher: Fetcher;
const fetchers: Fetcher[] = [];

function makeFetcher(opts: Partial<FetcherOptions> = {}): Fetcher {
  const f = createFetcher({
    allowPrivateNetworks: true,
    ipfsGateways: [`${ipfsGateway.origin}/ipfs/`],
    arweaveGateway: `${arweave.origin}/`,
    connectTimeoutMs: 1_000,
    totalTimeoutMs: 3_000,
    hedgeDelayMs: 100,
    ...opts,
  });
  fetchers.push(f);
  return f;
}

beforeAll(async () => {
  web = await startServer((req, res, url) => {
    const route = routes[url.pathname];
    if (route) route(req, res, url);
    else sendJson(res, { error: 'not found' }, 'application/json', 404);
  });
  // A stand-in IPFS gateway: it echoes the content path it was asked for.
  ipfsGateway = await startServer((_req, res, url) => {
    if (url.pathname.includes('missing')) return sendJson(res, 'not found', 'text/plain', 404);
    if (/^\/ip[fn]s\//.test(url.pathname)) return sendJson(res, { name: 'from gateway', path: url.pathname + url.search });
    sendJson(res, 'bad path', 'text/plain', 400);
  });
  arweave = await startServer((_req, res, url) => sendJson(res, { name: 'from arweave', path: url.pathname }));
  fetcher = makeFetcher();
});

afterAll(async () => {
  for (const f of fetchers) f.close();
  await Promise.all([web, ipfsGateway, arweave].map((s) => s?.close()));
});

// ---------------------------------------------------------------------------

describe('http(s) documents', () => {
  it('fetches JSON and records the attempt', async () => {
    const result = expectOk(await fetcher.fetchJson(`${web.origin}/doc.json`));
    expect(result.document).toEqual(JSON_DOC);
    expect(result.finalUrl).toBe(`${web.origin}/doc.json`);
    expect(result.contentType).toBe('application/json');
    expect(result.trace).toHaveLength(1);
    expect(result.trace[0]).toMatchObject({ url: `${web.origin}/doc.json`, status: 200, bytes: JSON.stringify(JSON_DOC).length });
    expect(result.trace[0].error).toBeUndefined();
  });

  it.each([
    ['/text.json', 'as text'],
    ['/octet', 'as octets'],
    ['/json-as-html', 'mislabelled'],
    ['/utf16', 'wide'],
  ])('sniffs JSON served from %s', async (path, name) => {
    expect(expectOk(await fetcher.fetchJson(`${web.origin}${path}`)).document.name).toBe(name);
  });

  it.each(['/html', '/html-as-json'])('rejects HTML from %s as INVALID_JSON', async (path) => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}${path}`));
    expect(result).toMatchObject({ reason: 'INVALID_JSON', retryable: false });
    expect(result.trace[0]).toMatchObject({ status: 200, error: 'INVALID_JSON' });
  });

  it('rejects a top-level array as NOT_AN_OBJECT', async () => {
    expect(expectFailure(await fetcher.fetchJson(`${web.origin}/array`))).toMatchObject({ reason: 'NOT_AN_OBJECT', retryable: false });
  });

  it.each(['gzip', 'br', 'deflate', 'raw'])('decodes %s content-encoding', async (encoding) => {
    const result = expectOk(await fetcher.fetchJson(`${web.origin}/encoded?e=${encoding}`));
    expect(result.document.name).toBe(`encoded ${encoding}`);
  });

  it('reports a corrupt encoding as BAD_ENCODING', async () => {
    expect(expectFailure(await fetcher.fetchJson(`${web.origin}/bad-gzip`))).toMatchObject({ reason: 'BAD_ENCODING', retryable: false });
  });
});

describe('status codes', () => {
  it('404 is final', async () => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/404`));
    expect(result).toMatchObject({ reason: 'HTTP_404', retryable: false });
    expect(result.trace).toEqual([expect.objectContaining({ status: 404, error: 'HTTP_404' })]);
  });

  it('500 is retryable', async () => {
    expect(expectFailure(await fetcher.fetchJson(`${web.origin}/500`))).toMatchObject({ reason: 'HTTP_500', retryable: true });
  });

  it('429 reports Retry-After without waiting for it', async () => {
    const started = performance.now();
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/429`));
    expect(result).toMatchObject({ reason: 'HTTP_429', retryable: true, retryAfterMs: 7000 });
    // Waiting would take the 7 s asked; the bound is far from both, for a loaded machine.
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe('redirects', () => {
  it('follows a three-hop chain and traces every hop', async () => {
    const result = expectOk(await fetcher.fetchJson(`${web.origin}/chain?n=3`));
    expect(result.document).toEqual(JSON_DOC);
    expect(result.finalUrl).toBe(`${web.origin}/doc.json`);
    expect(result.trace.map((a) => [a.status, a.redirectedTo])).toEqual([
      [302, `${web.origin}/chain?n=2`],
      [302, `${web.origin}/chain?n=1`],
      [302, `${web.origin}/doc.json`],
      [200, undefined],
    ]);
  });

  it('stops a loop with TOO_MANY_REDIRECTS after five redirects', async () => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/loop`));
    expect(result).toMatchObject({ reason: 'TOO_MANY_REDIRECTS', retryable: false });
    expect(result.trace).toHaveLength(6);
    expect(result.trace.at(-1)).toMatchObject({ status: 301, error: 'TOO_MANY_REDIRECTS' });
  });

  it('honours a lower maxRedirects', async () => {
    const strict = makeFetcher({ maxRedirects: 2 });
    expect(expectFailure(await strict.fetchJson(`${web.origin}/chain?n=3`)).reason).toBe('TOO_MANY_REDIRECTS');
  });

  it('refuses to be redirected to a non-http scheme', async () => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/redirect?to=${encodeURIComponent('file:///etc/passwd')}`));
    expect(result.reason).toBe('UNSUPPORTED_SCHEME');
    expect(result.trace.map((a) => a.error)).toEqual([undefined, 'UNSUPPORTED_SCHEME']);
  });
});

describe('SSRF guard', () => {
  it.each([
    ['a loopback IP literal', (port: number) => `http://127.0.0.1:${port}/doc.json`],
    ['a name resolving to loopback', (port: number) => `http://localhost:${port}/doc.json`],
    ['an IPv6 loopback literal', (port: number) => `http://[::1]:${port}/doc.json`],
    ['an IPv4-mapped IPv6 literal', (port: number) => `http://[::ffff:127.0.0.1]:${port}/doc.json`],
    ['a decimal IPv4 spelling', (port: number) => `http://2130706433:${port}/doc.json`],
    ['a cloud metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
  ])('blocks %s when private networks are off', async (_label, build) => {
    const guarded = makeFetcher({ allowPrivateNetworks: false });
    const result = expectFailure(await guarded.fetchJson(build(web.port)));
    expect(result).toMatchObject({ reason: 'BLOCKED_ADDRESS', retryable: false });
    expect(result.trace).toEqual([expect.objectContaining({ error: 'BLOCKED_ADDRESS' })]);
  });

  it.each(['127.0.0.1', 'localhost'])('lets %s through when private networks are allowed', async (host) => {
    expect(expectOk(await fetcher.fetchJson(`http://${host}:${web.port}/doc.json`)).document).toEqual(JSON_DOC);
  });

  it('checks every redirect hop, even from an allowlisted host', async () => {
    const other = await startServer((_req, res) => sendJson(res, { name: 'internal secret' }));
    try {
      const guarded = makeFetcher({ allowPrivateNetworks: false, allowedPrivateHosts: [`127.0.0.1:${web.port}`] });
      expect(expectOk(await guarded.fetchJson(`${web.origin}/doc.json`)).document).toEqual(JSON_DOC);

      const target = `${other.origin}/secret`;
      const result = expectFailure(await guarded.fetchJson(`${web.origin}/redirect?to=${encodeURIComponent(target)}`));
      expect(result.reason).toBe('BLOCKED_ADDRESS');
      expect(result.trace).toEqual([expect.objectContaining({ status: 307, redirectedTo: target }), expect.objectContaining({ url: target, error: 'BLOCKED_ADDRESS', bytes: 0 })]);
    } finally {
      await other.close();
    }
  });

  it('allowlists hostnames too, enforcing the rule in the DNS lookup otherwise', async () => {
    const guarded = makeFetcher({ allowPrivateNetworks: false, allowedPrivateHosts: ['localhost'] });
    expect(expectOk(await guarded.fetchJson(`http://localhost:${web.port}/doc.json`)).document).toEqual(JSON_DOC);

    const error = await new Promise<NodeJS.ErrnoException | null>((resolve) => guardedLookup('localhost', { all: true }, (err) => resolve(err)));
    expect(error).toMatchObject({ code: 'EBLOCKEDADDRESS' });
  });
});

describe('size and time limits', () => {
  it('cuts a 50 MB body at the cap and closes the connection', async () => {
    const started = performance.now();
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/big`));
    expect(result).toMatchObject({ reason: 'TOO_LARGE', retryable: false });
    expect(result.trace[0].bytes).toBeLessThanOrEqual(2 * MB + 64 * 1024);
    const written = await bigBody.closed.promise;
    expect(written).toBeLessThan(20 * MB);
    expect(performance.now() - started).toBeLessThan(2_000);
  });

  it('rejects a declared Content-Length over the cap before reading', async () => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/declared-big`));
    expect(result.reason).toBe('TOO_LARGE');
    expect(result.trace[0].bytes).toBe(0);
  });

  it.each(['/gzip-bomb', '/br-bomb'])('stops decompression bomb %s at the decoded cap', async (path) => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}${path}`));
    expect(result.reason).toBe('TOO_LARGE');
    expect(result.trace[0].bytes).toBeLessThan(MB);
  });

  it('applies a configured byte cap', async () => {
    const tiny = makeFetcher({ maxBytes: 16 });
    expect(expectFailure(await tiny.fetchJson(`${web.origin}/doc.json`)).reason).toBe('TOO_LARGE');
    expect(expectFailure(await tiny.fetchJson(`data:application/json,${JSON.stringify(JSON_DOC)}`)).reason).toBe('TOO_LARGE');
  });

  it.each(['/hang', '/stall-body'])('times out on %s within the deadline', async (path) => {
    const quick = makeFetcher({ totalTimeoutMs: 300 });
    const started = performance.now();
    const result = expectFailure(await quick.fetchJson(`${web.origin}${path}`));
    expect(result).toMatchObject({ reason: 'TIMEOUT', retryable: true });
    expect(result.trace[0].error).toBe('TIMEOUT');
    // Against a server that never ends: well past the 300 ms deadline, and far below forever.
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('gives up a body stalled mid-transfer at the stall deadline, long before the overall one', async () => {
    // The overall deadline is far out: only the stall deadline can end this fetch while the test runs.
    const patient = makeFetcher({ totalTimeoutMs: 120_000, stallTimeoutMs: 200 });
    const result = expectFailure(await patient.fetchJson(`${web.origin}/stall-body`));
    expect(result).toMatchObject({ reason: 'TIMEOUT', retryable: true });
    expect(result.message).toMatch(/stalled: no bytes for 200 ms/);
    // A media fetch's own stall deadline wins over the fetcher's.
    const bytes = await patient.fetchBytes(`${web.origin}/stall-body`, { maxBytes: 1_000, stallTimeoutMs: 150 });
    expect(bytes.ok ? 'ok' : bytes.message).toMatch(/stalled: no bytes for 150 ms/);
  });

  it('stops when the caller aborts', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 50);
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/hang`, { signal: controller.signal }));
    expect(result.reason).toBe('ABORTED');
  });

  it('reports an unreachable host as retryable', async () => {
    const gone = await startServer(() => {});
    await gone.close();
    expect(expectFailure(await fetcher.fetchJson(`${gone.origin}/doc.json`))).toMatchObject({ reason: 'UNREACHABLE', retryable: true });
  });
});

describe('content-addressed URIs', () => {
  const cases: [string, string][] = [
    [`ipfs://${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [`ipfs://ipfs/${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [CID0, `/ipfs/${CID0}`],
    [`${CID1}/1.json`, `/ipfs/${CID1}/1.json`],
    [`/ipfs/${CID1}/meta`, `/ipfs/${CID1}/meta`],
    [`https://ipfs.io/ipfs/${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [`https://gateway.pinata.cloud/ipfs/${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [`https://${CID1}.ipfs.dweb.link/1.json`, `/ipfs/${CID1}/1.json`],
    [`https://cloudflare-ipfs.com/ipfs/${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [`https://nftstorage.link/ipfs/${CID0}/1.json`, `/ipfs/${CID0}/1.json`],
    [`ipfs://${CID0}/dir/My Token.json?v=2`, `/ipfs/${CID0}/dir/My%20Token.json?v=2`],
    ['ipns://app.example.org/meta.json', '/ipns/app.example.org/meta.json'],
  ];
  it.each(cases)('resolves %s through the configured gateway', async (uri, path) => {
    const result = expectOk(await fetcher.fetchJson(uri));
    expect(result.document).toEqual({ name: 'from gateway', path });
    expect(result.finalUrl.startsWith(`${ipfsGateway.origin}/`)).toBe(true);
  });

  it.each([
    [`ar://${TXID}/1.json`, `/${TXID}/1.json`],
    [`https://arweave.net/${TXID}`, `/${TXID}`],
  ])('resolves %s through the configured Arweave gateway', async (uri, path) => {
    const result = expectOk(await fetcher.fetchJson(uri));
    expect(result.document).toEqual({ name: 'from arweave', path });
  });

  it('reports content missing on every gateway as final', async () => {
    const result = expectFailure(await fetcher.fetchJson(`ipfs://${CID0}/missing.json`));
    expect(result).toMatchObject({ reason: 'HTTP_404', retryable: false });
  });

  it('fails cleanly when no gateway is configured', async () => {
    const none = makeFetcher({ ipfsGateways: [] });
    expect(expectFailure(await none.fetchJson(`ipfs://${CID0}`)).reason).toBe('UNSUPPORTED_SCHEME');
  });
});

describe('gateway hedging and health', () => {
  it('answers from the fast gateway while the slow one stalls, then prefers it', async () => {
    const timers = new Set<NodeJS.Timeout>();
    const slow = await startServer((_req, res, url) => {
      const timer = setTimeout(() => sendJson(res, { name: 'slow', path: url.pathname }), 2_000);
      timers.add(timer);
      res.on('close', () => clearTimeout(timer));
    });
    const fast = await startServer((_req, res, url) => sendJson(res, { name: 'fast', path: url.pathname }));
    try {
      const hedged = makeFetcher({ ipfsGateways: [slow.origin, fast.origin], hedgeDelayMs: 100, totalTimeoutMs: 5_000 });
      expect(hedged.gatewayHealth().map((h) => h.gateway)).toEqual([slow.origin, fast.origin]);

      const first = expectOk(await hedged.fetchJson(`ipfs://${CID0}/1.json`));
      expect(first.document.name).toBe('fast');
      expect(first.finalUrl).toBe(`${fast.origin}/ipfs/${CID0}/1.json`);
      // The loser is aborted and still shows up in the trace.
      expect(first.trace).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ url: `${fast.origin}/ipfs/${CID0}/1.json`, status: 200 }),
          expect.objectContaining({ url: `${slow.origin}/ipfs/${CID0}/1.json`, error: 'ABORTED' }),
        ]),
      );

      const health = hedged.gatewayHealth();
      expect(health.map((h) => h.gateway)).toEqual([fast.origin, slow.origin]);
      expect(health[0]).toMatchObject({ successes: 1, failures: 0 });

      const second = expectOk(await hedged.fetchJson(`ipfs://${CID0}/2.json`));
      expect(second.trace[0].url).toBe(`${fast.origin}/ipfs/${CID0}/2.json`);
      expect(second.trace).toHaveLength(1);
    } finally {
      for (const t of timers) clearTimeout(t);
      await Promise.all([slow.close(), fast.close()]);
    }
  });

  it('moves on immediately when a gateway fails and remembers the failure', async () => {
    const broken = await startServer((_req, res) => sendJson(res, 'bad gateway', 'text/plain', 502));
    try {
      const f = makeFetcher({ ipfsGateways: [broken.origin, ipfsGateway.origin], hedgeDelayMs: 10_000 });
      const result = expectOk(await f.fetchJson(`ipfs://${CID0}`));
      expect(result.trace.map((a) => a.status)).toEqual([502, 200]);
      const health = f.gatewayHealth();
      expect(health.map((h) => h.gateway)).toEqual([ipfsGateway.origin, broken.origin]);
      expect(health[1]).toMatchObject({ failures: 1, consecutiveFailures: 1 });
    } finally {
      await broken.close();
    }
  });

  it('times out across all hedged gateways at the total deadline', async () => {
    const silent = await startServer(() => {});
    try {
      const f = makeFetcher({ ipfsGateways: [silent.origin, `${silent.origin}/ipfs`.replace('127.0.0.1', 'localhost')], totalTimeoutMs: 300 });
      const started = performance.now();
      const result = expectFailure(await f.fetchJson(`ipfs://${CID0}`));
      expect(result).toMatchObject({ reason: 'TIMEOUT', retryable: true });
      expect(result.trace.map((a) => a.error)).toEqual(['TIMEOUT', 'TIMEOUT']);
      // Against a server that never ends: well past the 300 ms deadline, and far below forever.
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      await silent.close();
    }
  });

  it('reports the retryable failure when every gateway fails differently', async () => {
    const broken = await startServer((_req, res) => sendJson(res, 'unavailable', 'text/plain', 503));
    try {
      const f = makeFetcher({ ipfsGateways: [ipfsGateway.origin, broken.origin] });
      const result = expectFailure(await f.fetchJson(`ipfs://${CID0}/missing`));
      expect(result).toMatchObject({ reason: 'HTTP_503', retryable: true });
      expect(result.trace).toHaveLength(2);
    } finally {
      await broken.close();
    }
  });
});

describe('ERC-1155 {id} templates', () => {
  it('falls back from the spec spelling to the decimal id on 404', async () => {
    const result = expectOk(await fetcher.fetchJson(`${web.origin}/token/{id}.json`, { tokenId: 10n }));
    expect(result.document.name).toBe('decimal id');
    expect(result.trace.map((a) => [a.url.replace(web.origin, ''), a.status])).toEqual([
      [`/token/${'a'.padStart(64, '0')}.json`, 404],
      ['/token/10.json', 200],
    ]);
  });

  it('stops at the first non-404 failure', async () => {
    const result = expectFailure(await fetcher.fetchJson(`${web.origin}/500?id={id}`, { tokenId: 1n }));
    expect(result.reason).toBe('HTTP_500');
    expect(result.trace).toHaveLength(1);
  });

  it('rejects a token id outside uint256 as a value, not an exception', async () => {
    expect(expectFailure(await fetcher.fetchJson(`${web.origin}/{id}`, { tokenId: -1n })).reason).toBe('INVALID_URI');
  });
});

describe('inline documents', () => {
  const json = JSON.stringify({ name: 'Inline Ünïcode', attributes: [{ trait_type: 'x', value: 1 }] });
  it.each([
    ['base64', `data:application/json;base64,${b64(json)}`],
    ['percent-encoded', `data:application/json,${encodeURIComponent(json)}`],
    ['utf8 pseudo-encoding', `data:application/json;utf8,${json}`],
    ['charset parameter', `data:application/json;charset=utf-8,${encodeURIComponent(json)}`],
    ['raw JSON', `data:application/json,${json}`],
    ['text/plain media type', `data:text/plain;base64,${b64(json)}`],
    ['a JSON tokenURI', json],
  ])('decodes %s without the network', async (_label, uri) => {
    const result = expectOk(await fetcher.fetchJson(uri));
    expect(result.document).toEqual(JSON.parse(json));
    expect(result.trace).toHaveLength(1);
    expect(result.trace[0].status).toBeUndefined();
  });

  it.each([
    ['HTML', 'data:text/html,<h1>hi</h1>', 'INVALID_JSON'],
    ['broken JSON', 'data:application/json,{"name":', 'INVALID_JSON'],
    ['a JSON string', `data:application/json;base64,${b64('"just a string"')}`, 'NOT_AN_OBJECT'],
    ['a JSON array', '[{"name":"x"}]', 'NOT_AN_OBJECT'],
    ['an unsupported scheme', 'ftp://example.com/1.json', 'UNSUPPORTED_SCHEME'],
    ['garbage', 'http://[not-an-ip/', 'INVALID_URI'],
  ])('rejects %s', async (_label, uri, reason) => {
    const result = expectFailure(await fetcher.fetchJson(uri));
    expect(result).toMatchObject({ reason, retryable: false });
    expect(result.trace[0].error).toBe(reason);
  });

  // `levels` counts the document object itself: {"x":[[1]]} is 3 levels.
  const nested = (levels: number) => `{"s":"[{\\"[","x":${'['.repeat(levels - 1)}1${']'.repeat(levels - 1)}}`;

  it(`accepts a data: document nested ${MAX_DOCUMENT_DEPTH} levels deep (brackets inside strings do not count)`, async () => {
    const result = expectOk(await fetcher.fetchJson(`data:application/json;base64,${b64(nested(MAX_DOCUMENT_DEPTH))}`));
    expect(result.document.s).toBe('[{"[');
  });

  it.each([
    ['one level too deep, base64', `data:application/json;base64,${b64(nested(MAX_DOCUMENT_DEPTH + 1))}`],
    ['5 000 levels, raw', `data:application/json,${nested(5_000)}`],
    ['5 000 levels, a JSON tokenURI', nested(5_000)],
  ])('refuses a data: document nested %s as TOO_DEEP', async (_label, uri) => {
    const result = expectFailure(await fetcher.fetchJson(uri));
    expect(result).toMatchObject({ reason: 'TOO_DEEP', retryable: false });
    expect(result.message).toContain(`deeper than ${MAX_DOCUMENT_DEPTH} levels`);
    expect(result.trace[0].error).toBe('TOO_DEEP');
  });

  it('sanitises a scripted SVG image from a base64 document', async () => {
    const svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(document.cookie)</script><circle r="4" onclick="steal()"/></svg>';
    const doc = { name: 'On-chain', image: `data:image/svg+xml;base64,${b64(svg)}`, image_data: svg };
    const result = expectOk(await fetcher.fetchJson(`data:application/json;base64,${b64(JSON.stringify(doc))}`));
    const { metadata, raw } = normalizeTokenDocument(result.document, { ipfsGateways: [ipfsGateway.origin], arweaveGateway: arweave.origin });
    const image = Buffer.from(metadata.image!.split(',')[1], 'base64').toString('utf8');
    for (const out of [image, metadata.imageData!]) {
      expect(out).toBe('<svg xmlns="http://www.w3.org/2000/svg"><circle r="4"/></svg>');
    }
    expect(raw.image_data).toBe(svg);
  });
});
