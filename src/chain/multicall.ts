import { decodeFunctionResult, encodeFunctionData, type Address, type Hex } from 'viem';
import type { ChainClient } from './client.ts';
import { isTransportFailure, revertData } from './node-errors.ts';

export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';

const aggregate3Abi = [
  {
    type: 'function',
    name: 'aggregate3',
    stateMutability: 'payable',
    inputs: [
      {
        name: 'calls',
        type: 'tuple[]',
        components: [
          { name: 'target', type: 'address' },
          { name: 'allowFailure', type: 'bool' },
          { name: 'callData', type: 'bytes' },
        ],
      },
    ],
    outputs: [
      {
        name: 'returnData',
        type: 'tuple[]',
        components: [
          { name: 'success', type: 'bool' },
          { name: 'returnData', type: 'bytes' },
        ],
      },
    ],
  },
] as const;

export interface Call {
  target: Address;
  data: Hex;
}

/** `ok: false` carries the revert data (often empty). A call to an address without code is ok with data `0x`. */
export interface CallResult {
  ok: boolean;
  data: Hex;
}

export interface MulticallOptions {
  /** Calls per eth_call before any splitting (default 300). */
  chunkSize?: number;
  blockNumber?: bigint;
  /** Parallel eth_calls when the chain has no Multicall3 (default 8). */
  concurrency?: number;
}

/**
 * Chains learned to lack Multicall3. There is no separate probe: an aggregate3 sent to an
 * address without code answers empty, which is how its absence is noticed, at no extra round trip.
 */
const noMulticall = new WeakSet<ChainClient>();

class NoMulticallError extends Error {}

async function aggregate(chain: ChainClient, calls: Call[], blockNumber?: bigint): Promise<CallResult[]> {
  const data = encodeFunctionData({
    abi: aggregate3Abi,
    functionName: 'aggregate3',
    args: [calls.map((c) => ({ target: c.target, allowFailure: true, callData: c.data }))],
  });
  const res = await chain.public.call({ to: MULTICALL3_ADDRESS, data, blockNumber });
  if (!res.data || res.data === '0x') throw new NoMulticallError();
  const out = decodeFunctionResult({ abi: aggregate3Abi, functionName: 'aggregate3', data: res.data ?? '0x' });
  return out.map((r) => ({ ok: r.success, data: r.returnData }));
}

/**
 * Every call of a request in as few eth_calls as the node allows: one aggregate3 per chunk,
 * halving a chunk the node refuses (gas cap, return-data limit) until single calls remain.
 */
async function aggregateSplitting(chain: ChainClient, calls: Call[], blockNumber?: bigint): Promise<CallResult[]> {
  try {
    return await aggregate(chain, calls, blockNumber);
  } catch (err) {
    if (isTransportFailure(err) || err instanceof NoMulticallError) throw err;
    if (calls.length === 1) return [await single(chain, calls[0], blockNumber)];
    const mid = Math.ceil(calls.length / 2);
    const [a, b] = await Promise.all([aggregateSplitting(chain, calls.slice(0, mid), blockNumber), aggregateSplitting(chain, calls.slice(mid), blockNumber)]);
    return [...a, ...b];
  }
}

async function single(chain: ChainClient, call: Call, blockNumber?: bigint): Promise<CallResult> {
  try {
    const res = await chain.public.call({ to: call.target, data: call.data, blockNumber });
    return { ok: true, data: res.data ?? '0x' };
  } catch (err) {
    const data = revertData(err);
    if (data !== undefined) return { ok: false, data };
    throw err;
  }
}

async function singles(chain: ChainClient, calls: Call[], opts: MulticallOptions): Promise<CallResult[]> {
  const out: CallResult[] = new Array(calls.length);
  let next = 0;
  const worker = async () => {
    while (next < calls.length) {
      const i = next++;
      out[i] = await single(chain, calls[i], opts.blockNumber);
    }
  };
  await Promise.all(Array.from({ length: Math.min(opts.concurrency ?? 8, calls.length) }, worker));
  return out;
}

export async function multicall(chain: ChainClient, calls: Call[], opts: MulticallOptions = {}): Promise<CallResult[]> {
  if (calls.length === 0) return [];
  if (noMulticall.has(chain)) return singles(chain, calls, opts);
  const size = opts.chunkSize ?? 300;
  const chunks: Call[][] = [];
  for (let i = 0; i < calls.length; i += size) chunks.push(calls.slice(i, i + size));
  try {
    const results = await Promise.all(chunks.map((c) => aggregateSplitting(chain, c, opts.blockNumber)));
    return results.flat();
  } catch (err) {
    if (!(err instanceof NoMulticallError)) throw err;
    noMulticall.add(chain);
    return singles(chain, calls, opts);
  }
}
