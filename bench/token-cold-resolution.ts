// Cold resolution of 500 tokens whose origin takes 50 ms per document: metarelay (batched chain
// reads, bounded fetch concurrency) against the naive loop (tokenURI eth_call + fetch per token).
//
//   npx tsx bench/token-cold-resolution.ts                 # PGlite in temp folders
//   BENCH_DB=postgres npx tsx bench/token-cold-resolution.ts
//
// Result JSON on stdout; progress on stderr.
import { createPublicClient, http, parseAbi, type Address } from 'viem';
import { CONTRACT_DOCUMENT_PATH, contractDocument, erc721Document, erc721Path } from '../src/devchain/index.ts';
import type { Services } from '../src/services.ts';
import { dbKindFromEnv, deployErc721WithTokens, machineInfo, openBenchDb, progress, runBench, startChain, startMetarelay, type BenchChain, type Cleanup } from './lib/harness.ts';
import { startRpcRecorder, type RpcRecorder } from './lib/rpc-recorder.ts';

const TOKENS = 500;
const ORIGIN_DELAY_MS = 50;
const RPC_LIMIT = 100;
const TARGET_MAX_RPC_CALLS = 3;

interface ChainTraffic {
  /** JSON-RPC calls, whatever HTTP request carried them. */
  calls: number;
  byMethod: Record<string, number>;
  /** HTTP requests to the node (a JSON-RPC batch is one). */
  roundTrips: number;
}

async function traffic(s: Services): Promise<ChainTraffic> {
  const byMethod: Record<string, number> = {};
  let calls = 0;
  for (const v of (await s.metrics.chainRpcCalls.get()).values) {
    const m = String(v.labels.method);
    byMethod[m] = (byMethod[m] ?? 0) + v.value;
    calls += v.value;
  }
  let roundTrips = 0;
  for (const v of (await s.metrics.chainRpcRequests.get()).values) roundTrips += v.value;
  return { calls, byMethod, roundTrips };
}

function tokenDocFetches(chain: BenchChain, ids: string[]): number {
  return ids.reduce((n, id) => n + chain.origin.requestCount(erc721Path(id)), 0);
}

/** Waits until work the resolution started in the background (contract info) has gone quiet. */
async function settle(s: Services, quietMs = 500, maxMs = 10_000): Promise<ChainTraffic> {
  const started = Date.now();
  let last = await traffic(s);
  let quietSince = Date.now();
  while (Date.now() - started < maxMs) {
    await new Promise((r) => setTimeout(r, 100));
    const now = await traffic(s);
    if (now.calls !== last.calls) {
      last = now;
      quietSince = Date.now();
    } else if (Date.now() - quietSince >= quietMs) break;
  }
  return last;
}

function checkAllAvailable(label: string, tokens: Array<{ tokenId: string; status: string; name: string }>, ids: string[]) {
  const bad = tokens.filter((t, i) => t.status !== 'AVAILABLE' || t.tokenId !== ids[i] || t.name !== `Dev ERC721 #${ids[i]}`);
  if (tokens.length !== ids.length || bad.length) {
    throw new Error(`${label}: ${bad.length} of ${tokens.length} tokens wrong, e.g. ${JSON.stringify(bad[0])?.slice(0, 300)}`);
  }
}

async function measureMetarelay(
  label: string,
  chain: BenchChain,
  recorder: RpcRecorder,
  ids: string[],
  s: Services,
  resolveAll: () => Promise<Array<{ tokenId: string; status: string; name: string }>>,
) {
  const before = await traffic(s);
  const fetchesBefore = tokenDocFetches(chain, ids);
  recorder.take();
  const t0 = performance.now();
  const tokens = await resolveAll();
  const wallMs = performance.now() - t0;
  const during = await traffic(s);
  const roundTripsDuring = recorder.take();
  checkAllAvailable(label, tokens, ids);
  const fetches = tokenDocFetches(chain, ids) - fetchesBefore;
  if (fetches !== ids.length) throw new Error(`${label}: ${fetches} document fetches for ${ids.length} tokens`);
  const after = await settle(s);
  const roundTripsAfter = recorder.take();
  progress(`${label}: ${ids.length} tokens in ${wallMs.toFixed(0)} ms, ${during.calls - before.calls} chain calls`);
  const diff = (a: ChainTraffic, b: ChainTraffic): ChainTraffic => {
    const byMethod: Record<string, number> = {};
    for (const [k, v] of Object.entries(a.byMethod)) if (v - (b.byMethod[k] ?? 0)) byMethod[k] = v - (b.byMethod[k] ?? 0);
    return { calls: a.calls - b.calls, byMethod, roundTrips: a.roundTrips - b.roundTrips };
  };
  return {
    wallMs: Math.round(wallMs),
    chainRpc: diff(during, before),
    // Meeting a contract for the first time also reads its contract info in the background.
    chainRpcIncludingBackground: diff(after, before),
    // What each HTTP round trip to the node carried, as seen by a recording proxy.
    chainRoundTrips: [...roundTripsDuring, ...roundTripsAfter.map((r) => ({ ...r, afterResponse: true }))],
    originDocumentFetches: fetches,
    available: tokens.length,
  };
}

runBench(async (cleanup: Cleanup) => {
  const dbKind = dbKindFromEnv();
  const chain = await startChain(cleanup);
  const ids = Array.from({ length: TOKENS }, (_, i) => String(i + 1));
  for (const id of ids) chain.origin.setDocument(erc721Path(id), erc721Document(chain.origin.url, id), { delayMs: ORIGIN_DELAY_MS });
  chain.origin.setDocument(CONTRACT_DOCUMENT_PATH, contractDocument(chain.origin.url));
  const contract = (
    await deployErc721WithTokens(chain, {
      baseUri: `${chain.origin.url}/erc721/`,
      contractUri: `${chain.origin.url}${CONTRACT_DOCUMENT_PATH}`,
      ids: ids.map(BigInt),
      batchSize: 100,
    })
  ).toLowerCase() as Address;

  const recorder = await startRpcRecorder(chain.anvil.rpcUrl);
  cleanup.add('stop rpc recorder', () => recorder.stop());

  // 1. metarelay, the whole set through the service API in one call.
  const db1 = await openBenchDb(dbKind, cleanup);
  const mr1 = await startMetarelay(chain, db1, cleanup, { rpcUrl: recorder.url });
  const fetchConcurrency = mr1.services.config.metadata.fetchConcurrency;
  const chainClient = mr1.services.chains.get(chain.anvil.chainId);
  if (!chainClient) throw new Error('metarelay has no client for the anvil chain');
  const metarelay = await measureMetarelay('metarelay (service API, 500 ids)', chain, recorder, ids, mr1.services, async () => {
    const r = await mr1.services.tokens.getTokens(chainClient, contract, ids, { waitMs: 60_000 });
    return r.tokens;
  });

  // 2. The naive loop, right after, with metarelay's fetch concurrency.
  const naive = await (async () => {
    let calls = 0;
    const client = createPublicClient({
      transport: http(chain.anvil.rpcUrl, {
        onFetchRequest: () => {
          calls++;
        },
      }),
    });
    const abi = parseAbi(['function tokenURI(uint256 id) view returns (string)']);
    const fetchesBefore = tokenDocFetches(chain, ids);
    const names = new Array<string>(ids.length);
    let next = 0;
    const worker = async () => {
      while (next < ids.length) {
        const i = next++;
        const uri = await client.readContract({ address: contract, abi, functionName: 'tokenURI', args: [BigInt(ids[i])] });
        const res = await fetch(uri);
        if (!res.ok) throw new Error(`naive: ${uri}: HTTP ${res.status}`);
        names[i] = ((await res.json()) as { name: string }).name;
      }
    };
    const t0 = performance.now();
    await Promise.all(Array.from({ length: fetchConcurrency }, worker));
    const wallMs = performance.now() - t0;
    const wrong = names.filter((n, i) => n !== `Dev ERC721 #${ids[i]}`).length;
    if (wrong) throw new Error(`naive: ${wrong} documents wrong`);
    progress(`naive: ${ids.length} tokens in ${wallMs.toFixed(0)} ms, ${calls} chain calls`);
    return {
      wallMs: Math.round(wallMs),
      chainRpc: { calls, byMethod: { eth_call: calls }, roundTrips: calls },
      originDocumentFetches: tokenDocFetches(chain, ids) - fetchesBefore,
      available: ids.length - wrong,
    };
  })();

  // 3. metarelay as an RPC client has to use it: 100 ids per GetTokenMetadata, 5 calls at once.
  const db2 = await openBenchDb(dbKind, cleanup);
  const mr2 = await startMetarelay(chain, db2, cleanup, { rpcUrl: recorder.url, config: { metadata: { inlineWaitMs: 60_000 } } });
  const metarelayRpc = await measureMetarelay('metarelay (5 concurrent RPC calls of 100)', chain, recorder, ids, mr2.services, async () => {
    const chunks: string[][] = [];
    for (let i = 0; i < ids.length; i += RPC_LIMIT) chunks.push(ids.slice(i, i + RPC_LIMIT));
    const answers = await Promise.all(
      chunks.map(async (chunk) => {
        const res = await fetch(`${mr2.baseUrl}/rpc/Metadata/GetTokenMetadata`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-access-key': mr2.accessKey },
          body: JSON.stringify({ chainID: 'anvil', contractAddress: contract, tokenIDs: chunk }),
        });
        const text = await res.text();
        if (res.status !== 200) throw new Error(`GetTokenMetadata: HTTP ${res.status} ${text.slice(0, 300)}`);
        return (JSON.parse(text) as { tokenMetadata: Array<{ tokenId: string; status: string; name: string }> }).tokenMetadata;
      }),
    );
    return answers.flat();
  });

  const floorMs = Math.ceil(TOKENS / fetchConcurrency) * ORIGIN_DELAY_MS;
  return {
    bench: 'token-cold-resolution',
    db: dbKind,
    tokens: TOKENS,
    originDelayMs: ORIGIN_DELAY_MS,
    fetchConcurrency,
    fetchFloorMs: floorMs,
    machine: machineInfo(),
    metarelay: {
      path: `services.tokens.getTokens(chain, contract, ${TOKENS} ids, { waitMs: 60000 }): one call, fresh database`,
      ...metarelay,
    },
    naive: {
      path: `viem readContract tokenURI + fetch per token, ${fetchConcurrency} tokens at a time`,
      ...naive,
    },
    metarelayRpc5x100: {
      path: `${TOKENS / RPC_LIMIT} concurrent POST /rpc/Metadata/GetTokenMetadata of ${RPC_LIMIT} ids (inlineWaitMs 60000), fresh database`,
      ...metarelayRpc,
    },
    comparison: {
      chainCalls: { metarelay: metarelay.chainRpc.calls, naive: naive.chainRpc.calls, metarelayRpc5x100: metarelayRpc.chainRpc.calls },
      wallMs: { metarelay: metarelay.wallMs, naive: naive.wallMs, metarelayRpc5x100: metarelayRpc.wallMs },
      naiveOverMetarelayWallTime: Number((naive.wallMs / metarelay.wallMs).toFixed(2)),
      targetMaxChainCalls: TARGET_MAX_RPC_CALLS,
      meetsTarget: metarelay.chainRpc.calls <= TARGET_MAX_RPC_CALLS,
    },
  };
});
