// A JSON-RPC proxy in front of anvil that behaves like a hosted provider (test/support/rpc-proxy.ts
// underneath): each fault class is switched on and off with set(). What is forwarded really reaches the
// node; a lagging or pruned view is made by asking the node about an older block, not by inventing answers.
import { decodeFunctionData, type Hex } from 'viem';
import { afterAll, beforeAll } from 'vitest';
import { startAnvil, type AnvilHandle } from '../../src/devchain/index.ts';
import { mulberry32 } from './random.ts';
import { probeAbi } from '../../src/relayer/abi.ts';
import { type RequestContext, type RpcCall, type RpcProxy, startRpcProxy } from './rpc-proxy.ts';

export interface ProviderFaults {
  /** Every call answered this much later. */
  latencyMs?: number;
  /** Above this many calls in one second, HTTP 429 with Retry-After (seconds). */
  rateLimit?: { callsPerSec: number; retryAfterSec?: number };
  /** eth_getLogs over more blocks than this: "block range is too large". */
  logRangeCap?: number;
  /** eth_getLogs answering more logs than this: "query returned more than N results". */
  logResultCap?: number;
  /** Batches of more members than this refused as a whole. */
  batchCap?: number;
  /** Logs (of eth_getLogs and of receipts) without blockTimestamp, as most providers send them. */
  stripBlockTimestamp?: boolean;
  /** Methods the provider does not serve ("method not available"). */
  refusedMethods?: string[];
  /** Every `every`-th call fails its whole HTTP request: 502, 503, or a connection dropped unanswered. */
  flaky?: { every: number; kind: 502 | 503 | 'drop' };
  /**
   * Load-balanced nodes apart: every other HTTP request is answered by a view `blocks` behind the head
   * (its eth_blockNumber, blocks above it null, receipts of newer blocks null, state reads at "latest"
   * from its head, a state read of a newer block refused "header not found"). With `only`, the node
   * behind answers every call `only` selects and no other: a provider that routes some calls (say,
   * the heavy eth_calls) to a pool of its own, which is behind.
   */
  lag?: {
    blocks: number;
    only?: (call: RpcCall) => boolean;
    /**
     * Half the requests, picked by a seeded coin per request, rather than strictly every other one. A
     * client whose loop sends an even number of requests per turn meets strict turns at the same step
     * every turn (the dispatcher's sender reads at each head, a simulation's pinned retries): always the
     * node behind, which a load balancer serving many clients does not do. Strict turns guarantee that
     * of any two requests one is answered by the live node, which head-reading tests count on.
     */
    coin?: boolean;
  };
  /** A node without old state: eth_getCode / eth_call / eth_getBalance / eth_getTransactionCount / eth_getStorageAt at a block older than head − N refused. */
  noArchiveDepth?: number;
  /**
   * How that node words the refusal of an old block (default: geth's "missing trie node", "header not
   * found" for eth_call, code -32000). `{head}` and `{block}` in the message stand for the node's head
   * and the block asked for: anvil's is `{ code: -32602, message: 'BlockOutOfRangeError: block height is {head} but requested was {block}' }`.
   */
  noArchiveError?: { code: number; message: string };
}

export interface ProviderProxy {
  url: string;
  proxy: RpcProxy;
  /** Replaces the faults in force (an empty object: a clean provider). */
  set(faults: ProviderFaults): void;
  readonly faults: ProviderFaults;
  /** How many answers each fault class changed, by class. */
  readonly hits: Record<string, number>;
  close(): Promise<void>;
}

const STATE_METHODS = new Set(['eth_getCode', 'eth_call', 'eth_getBalance', 'eth_getTransactionCount', 'eth_getStorageAt', 'eth_estimateGas', 'eth_createAccessList']);
/** Where each state method carries its block parameter. */
const BLOCK_PARAM: Record<string, number> = { eth_getCode: 1, eth_call: 1, eth_getBalance: 1, eth_getTransactionCount: 1, eth_getStorageAt: 2, eth_estimateGas: 1, eth_createAccessList: 1 };
const TAGS = new Set(['latest', 'pending', 'safe', 'finalized']);
const hex = (n: number) => `0x${n.toString(16)}`;

export async function startProviderProxy(upstream: string, initial: ProviderFaults = {}): Promise<ProviderProxy> {
  const proxy = await startRpcProxy(upstream);
  let faults: ProviderFaults = initial;
  const hits: Record<string, number> = {};
  const hit = (k: string) => {
    hits[k] = (hits[k] ?? 0) + 1;
  };
  let window = { at: 0, calls: 0 };
  /** The coin of a request, from its number: the same for each of its calls (a batch goes to one node). */
  const lagCoin = (request: number) => mulberry32(0x1a6 + request)() < 0.5;
  let callNo = 0;

  const liveHead = async (ctx: RequestContext): Promise<number> => {
    if (typeof ctx.state.head === 'number') return ctx.state.head;
    const res = await fetch(proxy.upstream, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] }),
    });
    const head = Number(((await res.json()) as { result: string }).result);
    ctx.state.head = head;
    return head;
  };
  /** Whether the node behind answers this call: the one `lag.only` selects, else every other request, or half of them by `lag.coin`. */
  const isLagged = (call: RpcCall, ctx: RequestContext) => (faults.lag ? (faults.lag.only ? faults.lag.only(call) : faults.lag.coin ? lagCoin(ctx.request) : ctx.request % 2 === 1) : false);
  /** The head of the view answering this call: the live one, or the lagging node's. */
  const viewHead = async (call: RpcCall, ctx: RequestContext): Promise<{ head: number; lagged: boolean }> => {
    const live = await liveHead(ctx);
    const lagged = isLagged(call, ctx);
    return { head: lagged ? Math.max(0, live - faults.lag!.blocks) : live, lagged };
  };
  const blockOf = async (tag: unknown, call: RpcCall, ctx: RequestContext): Promise<number> => {
    if (typeof tag === 'string' && tag.startsWith('0x')) return Number(tag);
    if (tag === 'earliest') return 0;
    return (await viewHead(call, ctx)).head;
  };

  // Whole-request faults first: a rate limit and a flaky balancer answer before anything is forwarded.
  proxy.addRule((call) => {
    if (faults.rateLimit) {
      const now = Date.now();
      if (now - window.at >= 1_000) window = { at: now, calls: 0 };
      if (++window.calls > faults.rateLimit.callsPerSec) {
        hit('rateLimit');
        return { kind: 'http', status: 429, headers: { 'retry-after': String(faults.rateLimit.retryAfterSec ?? 1) } };
      }
    }
    if (faults.flaky && ++callNo % faults.flaky.every === 0) {
      hit('flaky');
      return faults.flaky.kind === 'drop' ? { kind: 'drop' } : { kind: 'http', status: faults.flaky.kind };
    }
    if (faults.refusedMethods?.includes(call.method)) {
      hit('refusedMethod');
      return { kind: 'fail', code: -32601, message: `the method ${call.method} does not exist/is not available` };
    }
    if (faults.latencyMs) return { kind: 'delay', ms: faults.latencyMs };
    return undefined;
  });

  proxy.addRewrite(async (call, ctx) => {
    if (faults.logRangeCap && call.method === 'eth_getLogs') {
      const q = call.params[0] as { fromBlock?: unknown; toBlock?: unknown; blockHash?: unknown };
      if (!q.blockHash) {
        const from = await blockOf(q.fromBlock ?? 'latest', call, ctx);
        const to = await blockOf(q.toBlock ?? 'latest', call, ctx);
        if (to - from + 1 > faults.logRangeCap) {
          hit('logRangeCap');
          // Asked of a range no node has: the node answers an error, which the transform words as providers do.
          ctx.state[`refuse:${JSON.stringify(call.params)}`] = 'block range is too large';
        }
      }
    }
    const needsView = faults.lag || faults.noArchiveDepth !== undefined;
    if (!needsView) return undefined;
    const { head, lagged } = await viewHead(call, ctx);
    if (STATE_METHODS.has(call.method)) {
      const at = BLOCK_PARAM[call.method]!;
      const tag = call.params[at];
      const params = [...call.params];
      if (tag === undefined || (typeof tag === 'string' && TAGS.has(tag))) {
        if (lagged) {
          hit('lag');
          params[at] = hex(head);
          return { method: call.method, params };
        }
        return undefined;
      }
      const block = await blockOf(tag, call, ctx);
      const live = await liveHead(ctx);
      if (lagged && block > head) {
        hit('lag');
        ctx.state[`refuse:${JSON.stringify(call.params)}`] = 'header not found';
      } else if (faults.noArchiveDepth !== undefined && block < live - faults.noArchiveDepth) {
        hit('noArchive');
        const worded = faults.noArchiveError;
        ctx.state[`refuse:${JSON.stringify(call.params)}`] = worded
          ? { code: worded.code, message: worded.message.replaceAll('{head}', String(live)).replaceAll('{block}', String(block)) }
          : call.method === 'eth_call'
            ? 'header not found'
            : `missing trie node ${'ab'.repeat(32)} (path ) state ${'cd'.repeat(32)} is not available, not found`;
      }
      return undefined;
    }
    if (!lagged) return undefined;
    if (call.method === 'eth_getBlockByNumber' && (typeof call.params[0] !== 'string' || TAGS.has(call.params[0]))) {
      hit('lag');
      return { method: call.method, params: [hex(head), ...call.params.slice(1)] };
    }
    if (call.method === 'eth_getLogs') {
      const q = call.params[0] as { toBlock?: unknown; blockHash?: unknown };
      if (!q.blockHash && (q.toBlock === undefined || (typeof q.toBlock === 'string' && TAGS.has(q.toBlock)))) return { method: call.method, params: [{ ...q, toBlock: hex(head) }] };
      // As geth words it: a node behind never answers a range past its head (an answer short of logs would be worse).
      if (!q.blockHash && (await blockOf(q.toBlock, call, ctx)) > head) {
        hit('lag');
        ctx.state[`refuse:${JSON.stringify(call.params)}`] = 'block range extends beyond current head block';
      }
    }
    return undefined;
  });

  proxy.addAnswerTransform((call: RpcCall, answer, ctx) => {
    const refusal = ctx.state[`refuse:${JSON.stringify(call.params)}`];
    if (typeof refusal === 'string') return { error: { code: -32000, message: refusal } };
    if (refusal && typeof refusal === 'object') return { error: refusal as { code: number; message: string } };
    if (answer.error !== undefined) return answer;
    let result = answer.result;
    const lagHead = faults.lag && isLagged(call, ctx) && typeof ctx.state.head === 'number' ? Math.max(0, ctx.state.head - faults.lag.blocks) : undefined;
    if (lagHead !== undefined) {
      const numberOf = (r: unknown) => Number((r as { number?: string; blockNumber?: string } | null)?.number ?? (r as { blockNumber?: string } | null)?.blockNumber ?? -1);
      if (call.method === 'eth_blockNumber') result = hex(lagHead);
      else if ((call.method === 'eth_getBlockByNumber' || call.method === 'eth_getBlockByHash' || call.method === 'eth_getTransactionReceipt') && result && numberOf(result) > lagHead) result = null;
      else if (call.method === 'eth_getBlockReceipts' && Array.isArray(result) && result.length && numberOf(result[0]) > lagHead) result = null;
      if (result !== answer.result) hit('lag');
    }
    if (faults.stripBlockTimestamp) {
      const strip = (l: unknown) => {
        const { blockTimestamp: _, ...rest } = l as Record<string, unknown>;
        return rest;
      };
      if (call.method === 'eth_getLogs' && Array.isArray(result)) result = result.map(strip);
      else if (call.method === 'eth_getTransactionReceipt' && result) result = { ...(result as object), logs: ((result as { logs?: unknown[] }).logs ?? []).map(strip) };
      else if (call.method === 'eth_getBlockReceipts' && Array.isArray(result)) result = result.map((r) => ({ ...(r as object), logs: ((r as { logs?: unknown[] }).logs ?? []).map(strip) }));
    }
    return { result };
  });

  proxy.addAnswerRule((call, result) => {
    if (faults.logResultCap !== undefined && call.method === 'eth_getLogs' && Array.isArray(result) && result.length > faults.logResultCap) {
      hit('logResultCap');
      return `query returned more than ${faults.logResultCap} results`;
    }
    return undefined;
  });

  const apply = (f: ProviderFaults) => {
    faults = f;
    proxy.refuseBatchesOver(f.batchCap ?? null);
  };
  apply(initial);

  return {
    url: proxy.url,
    proxy,
    set: apply,
    get faults() {
      return faults;
    },
    hits,
    close: () => proxy.close(),
  };
}

/** Calls that run a bundle: the relayer's probe with jobs (eth_call of probeMany), and estimates (for `lag.only`). */
export const runsBundle = (call: RpcCall): boolean => {
  if (call.method === 'eth_estimateGas') return true;
  if (call.method !== 'eth_call') return false;
  const data = (call.params[0] as { data?: Hex; input?: Hex } | undefined)?.data ?? (call.params[0] as { input?: Hex } | undefined)?.input;
  try {
    const d = decodeFunctionData({ abi: probeAbi, data: data ?? '0x' });
    return d.functionName === 'probeMany' && d.args[0].length > 0;
  } catch {
    return false;
  }
};

/** For a whole test file: anvil mining on demand behind a provider proxy (no faults), started before its tests and closed after. */
export function anvilBehindProvider(): { readonly anvil: AnvilHandle; readonly provider: ProviderProxy } {
  const node = {} as { anvil: AnvilHandle; provider: ProviderProxy };
  beforeAll(async () => {
    node.anvil = await startAnvil({ blockTime: null });
    node.provider = await startProviderProxy(node.anvil.rpcUrl);
  }, 60_000);
  afterAll(async () => {
    await node.provider?.close();
    await node.anvil?.stop();
  });
  return node;
}
