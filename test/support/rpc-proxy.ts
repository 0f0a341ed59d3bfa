// A JSON-RPC HTTP proxy for fault-injection tests: it sits between a client (viem, the relayer) and a
// real node (anvil) and, per call, forwards, delays, fails, drops or swallows the answer. No mocks: a
// call that is forwarded really reaches the node.
import http from 'node:http';
import type { Socket } from 'node:net';

export type Fault =
  /** Forward after a delay. In a batch the one upstream request waits for the longest delay. */
  | { kind: 'delay'; ms: number }
  /** Answer a JSON-RPC error for this element without forwarding it. Default code -32000 (viem does not retry it; -32603 it does). */
  | { kind: 'fail'; code?: number; message?: string }
  /** Destroy the connection without an answer; nothing of the HTTP request is forwarded. */
  | { kind: 'drop' }
  /**
   * Forward upstream and wait for the node's answer, then never answer the caller: the connection is
   * held open (forever, or for `ms` after the node answered, then destroyed), so the caller times out
   * although the node did act.
   */
  | { kind: 'timeoutAfterForward'; ms?: number }
  /** Answer this HTTP status (text body, optional headers such as Retry-After) without forwarding anything of the HTTP request. */
  | { kind: 'http'; status: number; headers?: Record<string, string> };

export interface RpcCall {
  method: string;
  params: unknown[];
}

export type RpcRule = (call: RpcCall) => Fault | undefined;

/** What rewrites and transforms know of the HTTP request a call came in: its number, and a scratch object shared by its calls. */
export interface RequestContext {
  request: number;
  state: Record<string, unknown>;
}

/** Asked about each call to be forwarded: a call to forward instead (other params: a view of another block), or undefined. */
export type RewriteRule = (call: RpcCall, ctx: RequestContext) => RpcCall | undefined | Promise<RpcCall | undefined>;

/** Given each answer (result or error) before answer rules see it: the answer the caller gets instead (a node that leaves fields out, or is behind). */
export type AnswerTransform = (call: RpcCall, answer: { result?: unknown; error?: unknown }, ctx: RequestContext) => { result?: unknown; error?: unknown };

/**
 * Asked about each node answer that has a result, before the caller gets it: a message refuses it
 * (a JSON-RPC error -32005 with that message instead), as a node caps what one answer may hold.
 */
export type AnswerRule = (call: RpcCall, result: unknown) => string | undefined;

/**
 * Asked about each node answer that has a result, before the caller gets it: a value returned replaces
 * the result (e.g. fields an L2 node adds to a receipt), undefined keeps it.
 */
export type AnswerMap = (call: RpcCall, result: unknown) => unknown;

export interface RpcProxy {
  /** http://127.0.0.1:<port> */
  url: string;
  /** The node calls are forwarded to; e.g. after anvil restarts on another port. */
  readonly upstream: string;
  setUpstream(url: string): void;
  /** Rules are asked in the order added; the first returning a fault for a call wins. Returns a function removing the rule. */
  addRule(rule: RpcRule): () => void;
  /** Answer rules are asked in the order added; the first refusing wins. Returns a function removing the rule. */
  addAnswerRule(rule: AnswerRule): () => void;
  /** Rewrites are applied in the order added (each to the previous one's output). Returns a function removing it. */
  addRewrite(rule: RewriteRule): () => void;
  /** Transforms are applied in the order added. Returns a function removing it. */
  addAnswerTransform(t: AnswerTransform): () => void;
  /** Answer maps are applied in the order added, each to the previous one's result. Returns a function removing it. */
  mapAnswers(map: AnswerMap): () => void;
  clearRules(): void;
  /** Every call seen (batch elements one by one, in arrival order), faulted or not. Clear with `calls.length = 0`. */
  calls: RpcCall[];
  /** How many calls of `method` are in `calls`. */
  count(method: string): number;
  /** Every HTTP request seen, as its calls (a batch's members; one for a single call). Clear with `requests.length = 0`. */
  requests: RpcCall[][];
  /**
   * Refuse every batch of more than `max` members as a whole, as providers do ("batch too large"):
   * 'error' answers one JSON-RPC error object (HTTP 200), 'http' answers HTTP 413. null: none refused.
   */
  refuseBatchesOver(max: number | null, answer?: 'error' | 'http'): void;
  /** Batches refused that way so far. */
  readonly refusedBatches: number;
  /** Stops listening, destroys every client connection (keep-alive, held or delayed) and in-flight upstream request. */
  close(): Promise<void>;
}

interface JsonRpcRequest {
  jsonrpc?: string;
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

interface Outcome {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

const WHOLE_RESPONSE_FAULTS = ['drop', 'http', 'timeoutAfterForward'] as const;

function jsonRpcError(id: unknown, code: number, message: string): object {
  return { jsonrpc: '2.0', id: id ?? null, error: { code, message } };
}

function readBody(req: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

export async function startRpcProxy(upstream: string): Promise<RpcProxy> {
  let upstreamUrl = upstream;
  const rules: RpcRule[] = [];
  const answerRules: AnswerRule[] = [];
  const rewrites: RewriteRule[] = [];
  const transforms: AnswerTransform[] = [];
  let requestCount = 0;
  const calls: RpcCall[] = [];
  const requests: RpcCall[][] = [];
  let batchLimit: { max: number; answer: 'error' | 'http' } | null = null;
  let refusedBatches = 0;
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const upstreamRequests = new Set<http.ClientRequest>();
  let closed = false;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const t = setTimeout(() => {
        timers.delete(t);
        resolve();
      }, ms);
      timers.add(t);
    });

  /** POSTs `body` to the upstream node on a fresh connection (no pooling: the node may restart between calls). */
  const post = (body: string): Promise<Outcome> =>
    new Promise((resolve, reject) => {
      if (closed) return reject(new Error('proxy closed'));
      const req = http.request(upstreamUrl, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          upstreamRequests.delete(req);
          resolve({ status: res.statusCode ?? 502, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (err) => {
          upstreamRequests.delete(req);
          reject(err);
        });
      });
      upstreamRequests.add(req);
      req.on('error', (err) => {
        upstreamRequests.delete(req);
        reject(err);
      });
      req.end(body);
    });

  const faultFor = (call: RpcCall): Fault | undefined => {
    for (const rule of [...rules]) {
      const fault = rule(call);
      if (fault) return fault;
    }
    return undefined;
  };

  /**
   * Works out the answer to one HTTP request. Resolves to an Outcome to send, or to 'drop' / 'hang'
   * (hold the connection, optionally destroying it after ms).
   */
  const handle = async (raw: string): Promise<Outcome | { drop: true } | { hangMs: number | undefined }> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      return { status: 200, body: JSON.stringify(jsonRpcError(null, -32700, 'Parse error')) };
    }
    const isBatch = Array.isArray(parsed);
    const elements = (isBatch ? parsed : [parsed]) as JsonRpcRequest[];
    if (elements.length === 0) {
      return { status: 200, body: JSON.stringify(jsonRpcError(null, -32600, 'Invalid Request: empty batch')) };
    }

    const seen: RpcCall[] = elements.map((el) => ({
      method: typeof el?.method === 'string' ? el.method : '',
      params: Array.isArray(el?.params) ? el.params : [],
    }));
    calls.push(...seen);
    requests.push(seen);
    if (isBatch && batchLimit && elements.length > batchLimit.max) {
      refusedBatches++;
      if (batchLimit.answer === 'http') return { status: 413, body: `rpc-proxy: batch of ${elements.length} over ${batchLimit.max}` };
      return { status: 200, body: JSON.stringify(jsonRpcError(null, -32600, `rpc-proxy: batch of ${elements.length} is over the limit of ${batchLimit.max}`)) };
    }
    const faults = seen.map((call) => faultFor(call));
    const asked = seen;

    // A fault on the HTTP exchange itself decides for the whole batch. drop and http mean nothing
    // reached the node, so they take precedence over timeoutAfterForward; otherwise the first wins.
    const whole = faults
      .filter((f): f is Extract<Fault, { kind: (typeof WHOLE_RESPONSE_FAULTS)[number] }> => f !== undefined && (WHOLE_RESPONSE_FAULTS as readonly string[]).includes(f.kind))
      .sort((a, b) => Number(a.kind === 'timeoutAfterForward') - Number(b.kind === 'timeoutAfterForward'))[0];
    if (whole?.kind === 'drop') return { drop: true };
    if (whole?.kind === 'http') return { status: whole.status, body: `injected HTTP ${whole.status}`, headers: whole.headers };
    const ctx: RequestContext = { request: requestCount++, state: {} };
    // What is forwarded: each call as the rewrites make it (the caller's id kept for the answer mapping).
    const forwarded: RpcCall[] = [];
    for (const call of seen) {
      let c = call;
      for (const rw of [...rewrites]) c = (await rw(c, ctx)) ?? c;
      forwarded.push(c);
    }

    const delay = Math.max(0, ...faults.map((f) => (f?.kind === 'delay' ? f.ms : 0)));
    if (delay > 0) await sleep(delay);
    if (closed) return { drop: true };

    // Forward every element not answered here, with ids rewritten to positions so answers map back
    // whatever ids (duplicate, absent) the caller used and whatever order the node answers in.
    const forwardIdx = faults.flatMap((f, i) => (f?.kind === 'fail' ? [] : [i]));
    const answers = new Map<number, unknown>();
    if (forwardIdx.length > 0) {
      const outgoing = forwardIdx.map((i) => ({ ...elements[i], method: forwarded[i]!.method, params: forwarded[i]!.params, id: i }));
      let upstreamAnswer: Outcome;
      try {
        upstreamAnswer = await post(JSON.stringify(isBatch ? outgoing : outgoing[0]));
      } catch (err) {
        if (closed) return { drop: true };
        return { status: 502, body: `rpc-proxy: upstream ${upstreamUrl} unreachable: ${(err as Error).message}` };
      }
      if (whole?.kind === 'timeoutAfterForward') return { hangMs: whole.ms };
      if (upstreamAnswer.status !== 200) return upstreamAnswer;
      let decoded: unknown;
      try {
        decoded = JSON.parse(upstreamAnswer.body);
      } catch {
        return upstreamAnswer;
      }
      const list = Array.isArray(decoded) ? decoded : [decoded];
      for (const a of list as { id?: unknown }[]) {
        if (typeof a?.id === 'number' && forwardIdx.includes(a.id)) answers.set(a.id, a);
        else if (!isBatch || forwardIdx.length === 1) answers.set(forwardIdx[0], a); // e.g. a parse error with id null
      }
    } else if (whole?.kind === 'timeoutAfterForward') {
      return { hangMs: whole.ms };
    }

    const out: unknown[] = [];
    elements.forEach((el, i) => {
      const f = faults[i];
      const hasId = el !== null && typeof el === 'object' && 'id' in el;
      let answer: unknown;
      if (f?.kind === 'fail') answer = jsonRpcError(el?.id, f.code ?? -32000, f.message ?? 'rpc-proxy: injected fault');
      else answer = answers.get(i) ?? jsonRpcError(el?.id, -32603, 'rpc-proxy: no answer from upstream');
      if (f?.kind !== 'fail') {
        for (const t of [...transforms]) answer = { jsonrpc: '2.0', id: (answer as { id?: unknown }).id, ...t(asked[i]!, answer as { result?: unknown; error?: unknown }, ctx) };
      }
      const result = (answer as { result?: unknown }).result;
      const refusal = result !== undefined ? answerRules.map((rule) => rule(asked[i]!, result)).find((m) => m !== undefined) : undefined;
      if (refusal !== undefined) answer = jsonRpcError(el?.id, -32005, refusal);
      if (!hasId && isBatch) return; // a notification gets no answer
      out.push({ ...(answer as object), id: hasId ? el.id : null });
    });
    return { status: 200, body: JSON.stringify(isBatch ? out : out[0]) };
  };

  const server = http.createServer((req, res) => {
    res.on('error', () => {});
    void (async () => {
      const raw = await readBody(req);
      let outcome: Awaited<ReturnType<typeof handle>>;
      try {
        outcome = await handle(raw);
      } catch (err) {
        outcome = { status: 500, body: `rpc-proxy: ${(err as Error).stack ?? String(err)}` };
      }
      if ('drop' in outcome) {
        req.socket.destroy();
      } else if ('hangMs' in outcome) {
        if (outcome.hangMs !== undefined) void sleep(outcome.hangMs).then(() => req.socket.destroy());
      } else if (!res.writableEnded && !req.socket.destroyed) {
        const isJson = outcome.status === 200 || outcome.body.startsWith('{') || outcome.body.startsWith('[');
        res.writeHead(outcome.status, { 'content-type': isJson ? 'application/json' : 'text/plain', ...(outcome.headers ?? {}) });
        res.end(outcome.body);
      }
    })().catch(() => req.socket.destroy());
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as { port: number };

  return {
    url: `http://127.0.0.1:${port}`,
    get upstream() {
      return upstreamUrl;
    },
    setUpstream(url: string) {
      upstreamUrl = url;
    },
    addRule(rule) {
      rules.push(rule);
      return () => {
        const i = rules.indexOf(rule);
        if (i >= 0) rules.splice(i, 1);
      };
    },
    addAnswerRule(rule) {
      answerRules.push(rule);
      return () => {
        const i = answerRules.indexOf(rule);
        if (i >= 0) answerRules.splice(i, 1);
      };
    },
    addRewrite(rule) {
      rewrites.push(rule);
      return () => {
        const i = rewrites.indexOf(rule);
        if (i >= 0) rewrites.splice(i, 1);
      };
    },
    addAnswerTransform(t) {
      transforms.push(t);
      return () => {
        const i = transforms.indexOf(t);
        if (i >= 0) transforms.splice(i, 1);
      };
    },
    mapAnswers(map) {
      // A result-only transform: errors pass through untouched.
      const t: AnswerTransform = (call, answer) => (answer.result === undefined ? answer : { result: map(call, answer.result) ?? answer.result });
      transforms.push(t);
      return () => {
        const i = transforms.indexOf(t);
        if (i >= 0) transforms.splice(i, 1);
      };
    },
    clearRules() {
      rules.length = 0;
      answerRules.length = 0;
      rewrites.length = 0;
      transforms.length = 0;
    },
    calls,
    count(method) {
      return calls.filter((c) => c.method === method).length;
    },
    requests,
    refuseBatchesOver(max, answer = 'error') {
      batchLimit = max === null ? null : { max, answer };
    },
    get refusedBatches() {
      return refusedBatches;
    },
    close() {
      if (closed) return Promise.resolve();
      closed = true;
      for (const t of timers) clearTimeout(t);
      timers.clear();
      for (const r of upstreamRequests) r.destroy();
      upstreamRequests.clear();
      const done = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of sockets) s.destroy();
      return done;
    },
  };
}
