// The chain clients' fetch (src/chain/node-fetch.ts) against a real local HTTP server: it must answer
// and fail where viem, the batch splitter and the health look exactly as the global fetch does.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPublicClient, http as viemHttp } from 'viem';
import { nodeFetch } from '../src/chain/node-fetch.ts';

let server: http.Server;
const bomb = zlib.gzipSync(Buffer.alloc(40 * 1024 * 1024));
let base: string;
const seen: Array<{ method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      seen.push({ method: req.method, url: req.url, headers: req.headers, body });
      const json = (status: number, v: unknown, extra: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...extra });
        res.end(JSON.stringify(v));
      };
      if (req.url === '/rpc') {
        const calls = JSON.parse(body) as { id: number; method: string } | Array<{ id: number; method: string }>;
        const one = (c: { id: number; method: string }) => ({ jsonrpc: '2.0', id: c.id, result: c.method === 'eth_chainId' ? '0x7a69' : '0x10' });
        return json(200, Array.isArray(calls) ? calls.map(one) : one(calls));
      }
      if (req.url === '/gzip') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        return res.end(zlib.gzipSync(JSON.stringify({ jsonrpc: '2.0', id: 1, result: 'inflated' })));
      }
      if (req.url === '/brotli') {
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'br' });
        return res.end(zlib.brotliCompressSync(JSON.stringify({ ok: 'br' })));
      }
      if (req.url === '/bomb') {
        // 40 MiB of zeros in about 40 kB: over the 32 MiB an answer may inflate to.
        res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' });
        return res.end(bomb);
      }
      if (req.url === '/huge') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(Buffer.alloc(33 * 1024 * 1024, 0x20));
      }
      if (req.url === '/busy') return json(429, { error: 'slow down' }, { 'retry-after': '7' });
      if (req.url === '/down') return json(503, { error: 'down' });
      if (req.url === '/empty') {
        res.writeHead(204);
        return res.end();
      }
      if (req.url === '/stall') return; // never answers
      if (req.url === '/cut') return req.socket.destroy();
      json(404, { error: 'no such path' });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

describe('nodeFetch (the chain clients’ HTTP)', () => {
  it('posts the body with its headers and hands back status, headers and the whole body', async () => {
    const res = await nodeFetch(`${base}/rpc`, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Api': 'k' }, body: '{"id":3,"method":"eth_chainId"}' });
    expect(res.status).toBe(200);
    expect(res.ok).toBe(true);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 3, result: '0x7a69' });
    const got = seen.at(-1)!;
    expect(got.method).toBe('POST');
    expect(got.headers['x-api']).toBe('k');
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength('{"id":3,"method":"eth_chainId"}')));
  });

  it('serves a viem client, single calls and batches alike', async () => {
    const client = createPublicClient({ transport: viemHttp(`${base}/rpc`, { fetchFn: nodeFetch, batch: { wait: 0 } }) });
    const [chainId, block, again] = await Promise.all([client.getChainId(), client.getBlockNumber(), client.getBlockNumber({ cacheTime: 0 })]);
    expect(chainId).toBe(31337);
    expect(block).toBe(16n);
    expect(again).toBe(16n);
  });

  it('inflates a compressed answer and drops the encoding headers, as fetch does', async () => {
    const res = await nodeFetch(`${base}/gzip`, { method: 'POST', body: '{}' });
    expect(res.headers.get('content-encoding')).toBeNull();
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: 'inflated' });
    expect(await (await nodeFetch(`${base}/brotli`)).json()).toEqual({ ok: 'br' });
  });

  it('refuses an answer that inflates, or arrives, past 32 MiB instead of holding it', async () => {
    for (const path of ['/bomb', '/huge']) {
      const err = await nodeFetch(`${base}${path}`, { method: 'POST', body: '{}' }).catch((e: unknown) => e);
      expect(err, path).toBeInstanceOf(TypeError);
      expect((err as TypeError).message).toBe('fetch failed');
    }
    // And the next call is answered as usual.
    expect((await nodeFetch(`${base}/rpc`, { method: 'POST', body: '{"id":1,"method":"x"}' })).status).toBe(200);
  });

  it('hands back an HTTP error as an answer, its body and headers readable', async () => {
    const busy = await nodeFetch(`${base}/busy`, { method: 'POST', body: '{}' });
    expect(busy.status).toBe(429);
    expect(busy.headers.get('retry-after')).toBe('7');
    expect(await busy.json()).toEqual({ error: 'slow down' });
    const down = await nodeFetch(`${base}/down`, { method: 'POST', body: '{}' });
    expect([down.status, down.ok]).toEqual([503, false]);
    const empty = await nodeFetch(`${base}/empty`);
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe('');
  });

  it("rejects with the signal's reason when aborted, before or while waiting", async () => {
    const early = new AbortController();
    early.abort(new Error('gave up before'));
    await expect(nodeFetch(`${base}/rpc`, { method: 'POST', body: '{}', signal: early.signal })).rejects.toThrow('gave up before');
    await expect(nodeFetch(`${base}/stall`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(100) })).rejects.toMatchObject({ name: 'TimeoutError' });
    // The connection it gave up on does not poison the next call.
    expect((await nodeFetch(`${base}/rpc`, { method: 'POST', body: '{"id":1,"method":"x"}' })).status).toBe(200);
  });

  it("closes an idle connection itself a second before the server's Keep-Alive timeout, not after (a request on a closing connection fails)", async () => {
    // Node's server answers `Keep-Alive: timeout=2` and closes a connection idle for 2 s.
    const events: Array<{ what: 'answered' | 'client closed' | 'server closed'; at: number }> = [];
    const hinting = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"jsonrpc":"2.0","id":1,"result":"0x1"}', () => events.push({ what: 'answered', at: Date.now() }));
      });
    });
    hinting.keepAliveTimeout = 2_000;
    let connections = 0;
    hinting.on('connection', (socket) => {
      connections++;
      let ended = false;
      socket.on('end', () => {
        ended = true;
        events.push({ what: 'client closed', at: Date.now() });
      });
      socket.on('close', () => ended || events.push({ what: 'server closed', at: Date.now() }));
    });
    await new Promise<void>((r) => hinting.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(hinting.address() as AddressInfo).port}/`;
    try {
      const first = await nodeFetch(url, { method: 'POST', body: '{}' });
      expect(first.headers.get('keep-alive')).toBe('timeout=2');
      await first.text();
      // Reused while fresh: one connection for both.
      await (await nodeFetch(url, { method: 'POST', body: '{}' })).text();
      expect(connections).toBe(1);
      // The first close seen, whichever side (its 'end' may reach this loop late under load: waited for, bounded).
      await expect.poll(() => events.some((e) => e.what !== 'answered')).toBe(true);
      const closed = events.find((e) => e.what !== 'answered');
      // The client's close came first: before the server's own at its 2 s hint, however loaded the machine.
      expect(closed?.what).toBe('client closed');
      // The next request opens a new connection and is answered.
      expect((await nodeFetch(url, { method: 'POST', body: '{}' })).status).toBe(200);
      expect(connections).toBe(2);
    } finally {
      hinting.closeAllConnections();
      await new Promise((r) => hinting.close(r));
    }
  });

  it("fails as fetch fails: TypeError('fetch failed') with the socket's error as its cause", async () => {
    const closed = http.createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const refused = await nodeFetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TypeError);
    expect((refused as TypeError).message).toBe('fetch failed');
    expect(((refused as TypeError).cause as { code?: string }).code).toBe('ECONNREFUSED');
    const cut = await nodeFetch(`${base}/cut`, { method: 'POST', body: '{}' }).catch((e: unknown) => e);
    expect(cut).toBeInstanceOf(TypeError);
    expect(((cut as TypeError).cause as { code?: string }).code).toBe('ECONNRESET');
  });
});
