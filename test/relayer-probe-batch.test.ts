// The probe batcher shares one eth_call between simulations that arrive together, with every job's
// nonce overrides applied to the whole call. A bundle at its wallet's next nonce must never be judged
// under the override its queued successor brings (the predecessor's nonce marked used): found by the
// relayer soak bench (issue #19), where the dispatcher DROPPED such a bundle with "BadNonce(13, 0, 1)"
// although it had never run, and its successor then waited for a nonce that could not come.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { encodeFunctionData, pad, type Address } from 'viem';
import { SEQUENCE_V2_CONTEXT } from '../src/relayer/context.ts';
import { erc20, startRelayerEnv, type RelayerEnv } from './support/relayer-env.ts';
import { deployWallets, type User } from './support/relay-load.ts';
import { signedBundle, type SignedBundle } from './support/sequence-wallet.ts';
import { mine, revert, snapshot } from './support/anvil-control.ts';

let env: RelayerEnv;
let users: User[];

beforeAll(async () => {
  env = await startRelayerEnv();
  users = await deployWallets(env, 2);
}, 240_000);

afterAll(async () => {
  await env?.close();
});

const relayer = () => env.services.relayers.get(env.chainId)!;

function bundle(user: User, space: bigint, n: bigint): Promise<SignedBundle> {
  return signedBundle({
    signerKey: user.signer.privateKey,
    wallet: user.wallet,
    chainId: env.chainId,
    txs: [{ to: env.token, data: encodeFunctionData({ abi: erc20, functionName: 'mint', args: [user.wallet.address, 1n] }) }],
    nonce: { space, n },
    deployed: true,
  });
}

async function ethCalls(): Promise<number> {
  let n = 0;
  for (const v of (await env.services.metrics.chainRpcCalls.get()).values) if (v.labels.method === 'eth_call') n += v.value;
  return n;
}

describe('probe batching with nonce overrides', () => {
  it('runs a bundle at its next nonce correctly when its successor, simulated as if it had run, arrives in the same window', async () => {
    const [u] = users;
    const first = await bundle(u, 7n, 0n);
    const second = await bundle(u, 7n, 1n);
    const r = relayer();
    const sender = r.senders[0];
    const w = u.wallet.address;
    // Both orders: the plain one first, and the successor first.
    for (const order of ['plain first', 'successor first'] as const) {
      const plain = () => r.simulate(sender, w, first.input, [], undefined, [w]);
      const successor = () => r.simulate(sender, w, second.input, [{ wallet: w, space: 7n, nonce: 1n }], undefined, [w]);
      const [a, b] = order === 'plain first' ? await Promise.all([plain(), successor()]) : (await Promise.all([successor(), plain()])).reverse();
      expect({ order, ok: a.ok, reason: a.reason }).toEqual({ order, ok: true, reason: undefined });
      expect({ order, ok: b.ok, reason: b.reason }).toEqual({ order, ok: true, reason: undefined });
    }
    // The wallet is still at nonce 0 of space 7: nothing ran for real.
    expect(await r.simulate(sender, w, second.input)).toMatchObject({ ok: false });
  });

  it('keeps the default (a job runs the wallet it is sent to) when the caller names no wallets', async () => {
    const [u] = users;
    const first = await bundle(u, 8n, 0n);
    const second = await bundle(u, 8n, 1n);
    const r = relayer();
    const w = u.wallet.address;
    const [a, b] = await Promise.all([r.simulate(r.senders[0], w, first.input), r.simulate(r.senders[0], w, second.input, [{ wallet: w, space: 8n, nonce: 1n }])]);
    expect([a.ok, a.reason, b.ok]).toEqual([true, undefined, true]);
  });

  it('still shares one eth_call between jobs of different wallets, overrides or not', async () => {
    const [u1, u2] = users;
    const plain = await bundle(u1, 9n, 0n);
    const successor = await bundle(u2, 9n, 1n);
    const r = relayer();
    const before = await ethCalls();
    const [a, b] = await Promise.all([
      r.simulate(r.senders[0], u1.wallet.address, plain.input, [], undefined, [u1.wallet.address as Address]),
      r.simulate(r.senders[0], u2.wallet.address, successor.input, [{ wallet: u2.wallet.address, space: 9n, nonce: 1n }], undefined, [u2.wallet.address as Address]),
    ]);
    expect([a.ok, b.ok]).toEqual([true, true]);
    expect(await ethCalls()).toBe(before + 1);
  });

  it('shares one eth_call between jobs that read the implementation slot of one wallet (twice) and a job that reads none; each gets its slot, 47 gas dearer per call into the wallet', async () => {
    const [u1, u2] = users;
    const r = relayer();
    const w1 = u1.wallet.address.toLowerCase() as Address;
    const w2 = u2.wallet.address.toLowerCase() as Address;
    const [a, b, c] = await Promise.all([bundle(u1, 10n, 0n), bundle(u1, 11n, 0n), bundle(u2, 10n, 1n)]);
    const job = (wallet: Address, input: `0x${string}`) => ({ sender: r.senders[0], entrypoint: wallet, input, nonces: [], gasCap: 3_000_000n, wallets: [wallet] });
    const alone = await r.probe(job(w1, a.input));
    const before = await ethCalls();
    const [x, y, z] = await Promise.all([
      r.probe({ ...job(w1, a.input), slotReads: [w1], reads: [{ wallet: w1, space: 10n }] }),
      r.probe({ ...job(w1, b.input), slotReads: [w1] }),
      r.probe({ ...job(w2, c.input), nonces: [{ wallet: w2, space: 10n, nonce: 1n }] }),
    ]);
    expect(await ethCalls()).toBe(before + 1);
    expect([x.ok, y.ok, z.ok, x.reason, y.reason, z.reason]).toEqual([true, true, true, undefined, undefined, undefined]);
    expect([x.slots, y.slots, z.slots]).toEqual([[pad(SEQUENCE_V2_CONTEXT.mainModule.toLowerCase() as Address)], [pad(SEQUENCE_V2_CONTEXT.mainModule.toLowerCase() as Address)], []]);
    // The slot read is not taken for a nonce read: the job's own read comes first, as asked.
    expect(x.chainNonces).toEqual([0n]);
    expect(x.gasUsed - alone.gasUsed).toBe(47n);
    expect(x.trial).toBe('passed');
  });
});

describe('simulations after the chain went back', () => {
  it('a chain gone back below the block seen (a dev node reverted) is simulated on once the shared head has taken the lower head, not refused for good', async () => {
    const [u] = users;
    const r = relayer();
    const b = await bundle(u, 12n, 0n);
    const job = { sender: r.senders[0], entrypoint: u.wallet.address as Address, input: b.input, nonces: [], gasCap: 3_000_000n };
    const snap = await snapshot(env.rpcUrl);
    await mine(env.rpcUrl, 3);
    // The relayer and the shared head have both seen the higher block.
    const high = await env.public.getBlockNumber();
    await r.chainHead.read();
    r.observeBlock(high);
    await revert(env.rpcUrl, snap);
    const low = await env.public.getBlockNumber();
    expect(low).toBeLessThan(high);
    // Refused (the node is behind the block seen) until the head has read the lower chain often enough to take it.
    const deadline = Date.now() + 30_000;
    let sim: Awaited<ReturnType<typeof r.probe>> | undefined;
    const refusals: string[] = [];
    while (!sim && Date.now() < deadline) sim = await r.probe(job).catch((err: Error) => void refusals.push(err.message));
    expect(sim, refusals.join('\n')).toMatchObject({ ok: true, block: low });
    for (const m of refusals) expect(m).toMatch(/node is behind/);
  }, 60_000);
});
