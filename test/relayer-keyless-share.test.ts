// Keyless FeeOptions buy bounded node work, and never queue a keyed caller behind them (#52, finding 7).
// Eight keyless clients, each from a client address of its own over real HTTP, flood FeeOptions with
// maximal calls (16 bundles, each burning 800 000 gas) while a keyed client asks for its quote. Judged
// at the JSON-RPC proxy between the service and anvil: how many keyless simulations reached the node,
// how many were in flight at once, and that the keyed caller's simulations were answered while the
// keyless share was full (its simulations held at the proxy). No clocks: only counts and order.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, parseAbi, type Address, type Hex } from 'viem';
import { SEQUENCE_V2_CONTEXT } from '../src/devchain/sequence.ts';
import { PAYEE, erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import type { RpcCall } from './support/rpc-proxy.ts';
import { deployWallets } from './support/relay-load.ts';
import { newSigner, sequenceWalletAbi, walletFor, type SequenceTx } from './support/sequence-wallet.ts';

/** anonymousMaxGasLimit's default: one keyless call's whole gas budget. */
const BUDGET = 3_000_000n;
/** Gas each bundle of a flood call burns: three fit a budget, the fourth does not. */
const PER_BUNDLE = 800_000n;
const BUNDLES = 16;
const CLIENTS = 8;
const SHARE = 2;
/** Each keyless address's gas bucket: three calls' budgets, and no refill within the test (1 gas/s). */
const BURST = 3 * Number(BUDGET);

let env: RelayerEnv;
let burner: Address;
/** Deployed wallets every flood call runs a bundle of (deployed: no deployment gas is counted before simulating). */
let floodWallets: Address[];
const keylessWallets = new Set<string>();

beforeAll(async () => {
  env = await startRelayerEnv({
    proxy: true,
    service: { anonymousSimulationConcurrency: SHARE, anonymousSimulationGasPerSec: 1, anonymousSimulationGasBurst: BURST },
  });
  [burner] = await env.chain.deploy([{ contract: 'TestGasGriefer' }]);
  floodWallets = (await deployWallets(env, BUNDLES)).map((u) => u.wallet.address);
  for (const w of floodWallets) keylessWallets.add(w.toLowerCase());
}, 120_000);
afterAll(async () => {
  await env?.close();
});

const burnerAbi = parseAbi(['function go(uint256 need, uint256 reserve)']);
const tuple = (t: SequenceTx) => ({ delegateCall: false, revertOnError: true, gasLimit: t.gasLimit ?? 0n, target: t.to, value: 0n, data: t.data ?? '0x' });
const execute = (txs: SequenceTx[]): Hex => encodeFunctionData({ abi: sequenceWalletAbi, functionName: 'execute', args: [txs.map(tuple), 0n, '0x'] });

/** A guest call running a bundle of each flood wallet, each bundle burning PER_BUNDLE gas. */
function flood() {
  // Burns all but 30 000 of the 800 000 gas it is given (a priced simulation is never gas price 0).
  const burn: SequenceTx = { to: burner, data: encodeFunctionData({ abi: burnerAbi, functionName: 'go', args: [0n, 30_000n] }), gasLimit: PER_BUNDLE };
  const guestTxs = floodWallets.map((w): SequenceTx => ({ to: w, data: execute([burn]) }));
  return { wallet: floodWallets[0], to: SEQUENCE_V2_CONTEXT.guestModule, data: execute(guestTxs) };
}

/** A relayer call over real HTTP from a loopback address of its own (its own keyless bucket). */
function post(from: string, method: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  const url = new URL(`${env.relayerUrl}/rpc/Relayer/${method}`);
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        localAddress: from,
        agent: false,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const simulatedWallet = (c: RpcCall) => (c.method === 'eth_call' ? String((c.params[0] as { to?: string })?.to ?? '').toLowerCase() : '');
const isKeylessSimulation = (c: RpcCall) => keylessWallets.has(simulatedWallet(c));

/** Waits (bounded, by condition) until `cond` holds. */
async function until(what: string, cond: () => boolean) {
  for (let i = 0; i < 6_000 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!cond()) throw new Error(`never: ${what}`);
}

describe('eight keyless clients flooding FeeOptions with maximal calls', () => {
  it('cost the node at most one budget per call within a share of two at once, get 429 once their gas is spent, and never hold up a keyed caller', async () => {
    // Keyless simulations are held at the proxy until released, and counted in flight there.
    let inFlight = 0;
    let most = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // Counted as each HTTP request arrives (rules see every member of a batch at once), held in the rewrite.
    env.proxy!.addRule((call) => {
      if (isKeylessSimulation(call)) most = Math.max(most, ++inFlight);
      return undefined;
    });
    env.proxy!.addRewrite(async (call) => {
      if (isKeylessSimulation(call)) await gate;
      return undefined;
    });
    env.proxy!.addAnswerTransform((call, answer) => {
      if (isKeylessSimulation(call)) inFlight--;
      return answer;
    });
    env.proxy!.calls.length = 0;

    // Each client calls until refused for its gas (or ten calls); every answer is kept.
    const answers: Array<Array<{ status: number; retryAfter?: string; cause?: string }>> = Array.from({ length: CLIENTS }, () => []);
    const clients = Array.from({ length: CLIENTS }, async (_, i) => {
      for (let k = 0; k < 10; k++) {
        const r = await post(`127.0.0.${11 + i}`, 'FeeOptions', flood());
        answers[i].push({ status: r.status, retryAfter: r.headers['retry-after'] as string | undefined, cause: r.body.cause });
        if (r.status === 429 && /gas simulated/.test(r.body.cause)) return;
      }
    });

    // The share is full: two keyless simulations held at the proxy, the other clients' calls waiting behind them.
    await until('two keyless simulations in flight', () => inFlight >= SHARE);
    expect(most).toBe(SHARE);
    // A keyed caller is served meanwhile, in full: its simulations are not keyless ones, and none waits for the gate.
    const u = walletFor(newSigner().address);
    const keyed = [];
    for (let k = 0; k < 3; k++) {
      keyed.push(
        await post(
          '127.0.0.1',
          'FeeOptions',
          { wallet: u.address, to: u.address, data: execute([{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'transfer', args: [PAYEE, 0n] }) }]) },
          { 'x-access-key': env.accessKey },
        ),
      );
    }
    expect(inFlight).toBe(SHARE);
    for (const r of keyed) {
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      expect(r.body.options.map((o: { token: { symbol: string } }) => o.token.symbol).sort()).toEqual(['ETH', 'FUSD']);
      expect(BigInt(r.body.options[0].value)).toBeGreaterThan(0n);
    }

    release();
    await Promise.all(clients);

    // Never more than the share of keyless simulations at the node at once.
    expect(most).toBe(SHARE);
    for (const [i, list] of answers.entries()) {
      const last = list.at(-1)!;
      // Refused for its gas once three budgets are spent, with a Retry-After, before any node call...
      expect(last.status, `client ${i}: ${JSON.stringify(list)}`).toBe(429);
      expect(Number(last.retryAfter)).toBeGreaterThan(0);
      // ...and every call before that ended at its budget: the fourth bundle does not fit the 3 M left by three.
      const before = list.slice(0, -1);
      expect(before.length).toBe(3);
      for (const a of before) {
        expect(a.status).toBe(400);
        expect(a.cause).toMatch(/more than this relayer's limit of 3000000 gas for calls without an access key/);
      }
    }
    // At most four simulations per call reached the node (three that fit, the one that did not), not sixteen.
    const keylessRuns = env.proxy!.calls.filter(isKeylessSimulation).length;
    const calls = answers.flat().filter((a) => a.status === 400).length;
    expect(calls).toBe(CLIENTS * 3);
    expect(keylessRuns).toBeLessThanOrEqual(calls * 4);
    expect(keylessRuns).toBeGreaterThanOrEqual(calls * 3);
  }, 120_000);
});
